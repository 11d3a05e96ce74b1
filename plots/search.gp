# plots/search.gp: search time against device count, one line per search
# algorithm (DP vertex order), log scale (the PaSE paper's Table I as a figure).
# In: plotdir, term, outfile, datafile, algos (one data block per algorithm),
# colors (palette number per algorithm), ttl, pmin, pmax.
# datafile blocks: p <TAB> seconds.
load plotdir.'/terminal.gp'
set title ttl
set xlabel 'devices (P)'
set ylabel 'search time (s)'
set logscale x 2
set logscale y
set xrange [pmin/1.4:pmax*1.4]
set xtics 2
plot for [i=1:words(algos)] datafile index (i-1) using 1:2 with linespoints lw 2 \
         lc rgb sb_lc(word(colors, i)) pt sb_pt(word(colors, i)) ps 1.2 title word(algos, i)
