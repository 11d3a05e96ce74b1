# plots/validate.gp: the cost model against published training runs
# (`plot --validate`, `validate --plot`): predicted step seconds against the
# published ones, log-log, one range fitted to the points for both axes,
# the y = x line and the band of the largest error validate allows (its
# target_max_percent; 10% for a JSON without it); one colour per source (the paper), each
# point labelled by its run id where labels is 1 (every other source's
# labels on the left, so that two sources' labels do not cross; with many
# runs none: validate-error names each; a thin line from a label nudged up
# to its point); MAPE and the largest error in the title.
# In: plotdir, term, outfile, datafile, sources (one data block per source,
# in the legend's order), colors (palette number per source), ttl, lo, hi,
# labels (1 or 0), band (percent).
# datafile blocks: predicted s <TAB> published s <TAB> run id <TAB> the
# label's height (apart from the block's other labels).
load plotdir.'/terminal.gp'
set title ttl
set xlabel 'predicted step time (s)'
set ylabel 'published step time (s)'
set logscale xy
set xrange [lo:hi]
set yrange [lo:hi]
set size ratio -1
# under two decades gnuplot labels one tic or none: label 1, 2 and 5 of each
if (hi / lo < 100) {
    set xtics () ; set ytics ()
    do for [d=-3:5] {
        do for [m in "1 2 5"] {
            v = (m + 0) * 10.0**d
            set xtics add (sprintf('%g', v) v)
            set ytics add (sprintf('%g', v) v)
        }
    }
}
set key top left
set samples 200
# the odd sources' labels on the right of their points, the even ones' on the
# left: a plot element only where there are such sources and labels is 1 (an
# empty for-range is an error to gnuplot)
left = !labels ? "" : ", for [i=1:words(sources)] datafile index (i-1) " . \
    "using 1:4:(0):($2-$4) with vectors nohead lw 0.6 lc rgb '#999999' notitle" . \
    ", for [i=1:words(sources):2] datafile index (i-1) " . \
    "using 1:4:3 with labels left offset 1,0 font ',8' tc rgb sb_lc(word(colors, i)) notitle"
right = (!labels || words(sources) < 2) ? "" : ", for [i=2:words(sources):2] datafile index (i-1) " . \
    "using 1:4:3 with labels right offset -1,0 font ',8' tc rgb sb_lc(word(colors, i)) notitle"
# published p, predicted x: the error (x - p) / p within the band
plot '+' using 1:($1 / (1 + band / 100.0)):($1 / (1 - band / 100.0)) with filledcurves \
         fc rgb '#dddddd' fs solid 0.7 noborder title sprintf('±%g%%', band), \
     x with lines lw 1.5 dt 2 lc rgb '#444444' title 'y = x', \
     for [i=1:words(sources)] datafile index (i-1) using 1:2 with points \
         pt sb_pt(word(colors, i)) ps 1.4 lc rgb sb_lc(word(colors, i)) title word(sources, i) \
     @left @right
