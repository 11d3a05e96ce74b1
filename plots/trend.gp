# plots/trend.gp: best median step time per strategy kind of one (model, P)
# across runs, oldest first (nightly regression view).
# In: plotdir, term, outfile, datafile, kinds (one data block per kind),
# colors (palette number per kind), ttl, nruns.
# datafile blocks: run ordinal <TAB> median s <TAB> label ("#id commit").
load plotdir.'/terminal.gp'
set title ttl
set xlabel 'run (id, commit)'
set ylabel 'best median step time (s)'
set xrange [-0.5:nruns-0.5]
set yrange [0:*]
set xtics rotate by -30 noenhanced
plot for [i=1:words(kinds)] datafile index (i-1) using 1:2:xtic(3) with linespoints lw 2 \
         lc rgb sb_lc(word(colors, i)) pt sb_pt(word(colors, i)) ps 1.2 title word(kinds, i)
