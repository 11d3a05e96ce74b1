# plots/validate-error.gp: each published run's prediction error, signed
# ((predicted - published) / published, percent), a bar per run in the data
# file's order, labelled by its id on the x axis, one colour per source; a
# band at +- the largest error validate allows (target_max_percent), the
# zero line, MAPE, the largest error and how many runs lie in the band in
# the title (`plot --validate`, `validate --plot`).
# In: plotdir, term, outfile, datafile, sources (one data block per source,
# in the legend's order), colors, ttl, nruns, tmax (percent), span (the y
# range's half height, percent).
# datafile blocks: the run's index (1-based) <TAB> error percent <TAB> run id.
height = 500   # the run ids below take what the default height would leave empty
load plotdir.'/terminal.gp'
set title ttl
set ylabel 'predicted vs published step (%)'
set xrange [0:nruns+1]
set yrange [-span:span]
set xtics rotate by 90 right font ',7' nomirror
set xzeroaxis lt 1 lw 1 lc rgb '#444444'
set grid ytics
set boxwidth 0.7
set style fill solid 0.85 noborder
plot '+' using 1:(-tmax):(tmax) with filledcurves fc rgb '#e6e6e6' fs solid 1.0 noborder \
         title sprintf('±%g%%', tmax), \
     for [i=1:words(sources)] datafile index (i-1) using 1:2:xtic(3) with boxes \
         lc rgb sb_lc(word(colors, i)) title word(sources, i)
