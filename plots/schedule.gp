# plots/schedule.gp: the pipeline schedule of the first and last stages over
# one step, as a Gantt chart: each micro-batch's forward and backward as a
# bar where it runs, idle time the grey behind them (`plot --search`); with
# many micro-batches, bars of the share of each slice of the step busy
# (plots/fig_schedule.c says when).
# In: plotdir, term, outfile, datafile, ttl, step (the title's second line:
# the step as scheduled), sub (a third title line, or ''), ylabs
# ('|'-separated row labels, top first; a '%' written '%%': tic labels are
# formats), nrows (1 or 2), tend (the step's end, s), width, height.
# datafile: block 0 forwards, block 1 backwards; rows: x0 <TAB> x1 <TAB> y0
# <TAB> y1 (seconds; rows at y = 0 and 1, bars 0.6 tall).
load plotdir.'/terminal.gp'
set title ttl."\n".step.(strlen(sub) ? "\n".sub : '')
set xlabel 'seconds into the step'
set xrange [0:tend]
set yrange [-0.6:nrows - 0.4]
set ytics () noenhanced
set for [r=1:nrows] ytics add (sb_field(ylabs, r) nrows - r)
set grid xtics noytics
set key outside right top
set for [r=0:nrows - 1] object rectangle from 0, r - 0.3 to tend, r + 0.3 \
    fc rgb sb_lc(9) fs solid 0.35 noborder behind
plot for [k=0:1] datafile index k using (($1 + $2) / 2):(($3 + $4) / 2):(($2 - $1) / 2):(($4 - $3) / 2) \
         with boxxyerror fs solid 1.0 noborder lc rgb sb_lc(7 + k) title (k ? 'backward' : 'forward'), \
     keyentry with boxes fs solid 0.35 noborder lc rgb sb_lc(9) title 'idle'
