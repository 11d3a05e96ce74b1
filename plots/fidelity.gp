# plots/fidelity.gp: predicted step seconds (the cost model that priced the
# bench) against measured median step seconds of every strategy of one
# (model, P): linear axes, one range fitted to the points, the y = x line
# and a +-10% band; a marker per family (baselines, candidates, random) and
# a colour per strategy; Spearman's rho and MAPE in the title.
# In: plotdir, term, outfile, datafile, kinds (one data block per kind, in
# the legend's order), colors (palette number per kind), families (1, 2, 3
# per kind), ttl, lo, hi. datafile blocks: predicted s <TAB> median s.
load plotdir.'/terminal.gp'
set title ttl
set xlabel 'predicted step time (s)'
set ylabel 'measured median step time (s)'
set xrange [lo:hi]
set yrange [lo:hi]
set size ratio -1
set samples 2
plot '+' using 1:(0.9*$1):(1.1*$1) with filledcurves fc rgb '#dddddd' fs solid 0.7 noborder \
         title '±10%', \
     x with lines lw 1.5 dt 2 lc rgb '#444444' title 'y = x', \
     for [i=1:words(kinds)] datafile index (i-1) using 1:2 with points \
         pt sb_family_pt(word(families, i)) ps 1.6 lc rgb sb_lc(word(colors, i)) \
         title word(kinds, i), \
     keyentry with points pt sb_family_pt(1) lc rgb 'black' ps 1.6 title 'baselines', \
     keyentry with points pt sb_family_pt(2) lc rgb 'black' ps 1.6 title 'candidates', \
     keyentry with points pt sb_family_pt(3) lc rgb 'black' ps 1.6 title 'random'
