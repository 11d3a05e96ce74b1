# plots/nightly.gp: one strategy of one (model, P) across nights, oldest
# first: each launch's median step time, each night's median, and the band
# the history allows around the history's median (nightly regression view).
# In: plotdir, term, outfile, datafile, ttl, nruns. datafile block 0: one
# row per night: ordinal <TAB> night median <TAB> band low <TAB> band high
# <TAB> label ("#id"); block 1: one row per launch: ordinal <TAB> seconds.
load plotdir.'/terminal.gp'
set title ttl
set xlabel 'night (run id; last: the candidate)'
set ylabel 'median step time of a launch (s)'
set xrange [-0.5:nruns-0.5]
set xtics rotate by -30 noenhanced
plot datafile index 0 using 1:3:4 with filledcurves fc rgb '#cfe2f3' fs solid 0.6 \
         title 'history band', \
     datafile index 0 using 1:2:xtic(5) with linespoints lw 2 pt sb_pt(1) ps 1.2 lc rgb sb_lc(1) title 'night median', \
     datafile index 1 using 1:2 with points pt sb_pt(2) ps 0.8 lc rgb sb_lc(2) title 'launches'
