# plots/validate-gemm.gp: the large-GEMM rate each published run's step
# implies (`validate`'s implied_gemm_tflops: the machine file's GEMM figure
# at which the prediction meets the published step, every other figure
# unchanged; docs/validation.md), a point per run in the data file's order,
# labelled by its id on the x axis; one colour per machine and precision, a
# dashed line at that machine file's own rate.
# In: plotdir, term, outfile, datafile, series (one data block per machine
# and precision, in the legend's order), colors, ttl, nruns.
# datafile: a block per series, every run of it: the run's index (1-based)
# <TAB> implied TFLOP/s (NaN: none meets its step; its tic stays) <TAB> run
# id; then a block per series, the machine file's TFLOP/s at its first and
# last run (x <TAB> TFLOP/s).
load plotdir.'/terminal.gp'
set title ttl
set ylabel 'large-GEMM TFLOP/s'
set xrange [0:nruns+1]
set yrange [0:*]
set offsets 0, 0, graph 0.06, 0   # headroom: a rate on a tic stays off the border
set xtics rotate by 90 right font ',7' nomirror
set key inside bottom right box opaque
set grid ytics
plot for [i=1:words(series)] datafile index (i-1) using 1:2:xtic(3) with points \
         pt sb_pt(word(colors, i)) ps 1.2 lc rgb sb_lc(word(colors, i)) \
         title word(series, i).' (implied)', \
     for [i=1:words(series)] datafile index (words(series)+i-1) using 1:2 with lines dt 2 \
         lw 1.5 lc rgb sb_lc(word(colors, i)) title word(series, i).' (machine file)'
