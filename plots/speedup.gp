# plots/speedup.gp: speedup over data parallel against device count, one
# line per strategy kind (the PaSE paper's Fig. 6 form).
# In (gnuplot -e): plotdir, term, outfile, datafile, kinds (space-separated
# names, one data block per kind in that order), colors (palette number per
# kind), ttl, sub (a second title line: the parameters), pmin, pmax.
# datafile blocks: p <TAB> speedup <TAB> best median s <TAB> dp median s.
load plotdir.'/terminal.gp'
set title ttl."\n".sub
set xlabel 'devices (P)'
set ylabel 'speedup over data parallel (median step time)'
set logscale x 2
set xrange [pmin/1.4:pmax*1.4]
set xtics 2
set yrange [0:*]
plot for [i=1:words(kinds)] datafile index (i-1) using 1:2 with linespoints lw 2 \
         lc rgb sb_lc(word(colors, i)) pt sb_pt(word(colors, i)) ps 1.2 title word(kinds, i), \
     1 with lines dt 2 lc rgb 'gray40' title 'data parallel = 1'
