# plots/stacked.gp: stacked bars, one per row of the data (a pipeline stage,
# or the whole step), one segment per category, and a level across them
# (`plot --search`: memory-*, the device's memory; steptime-*, the step).
# In: plotdir, term, outfile, datafile, ttl, cats ('|'-separated category
# names, the legend's order), colors (palette number per category), ncols
# (categories), nrows, xlab, ylab, hline (the level), hlinettl, ymax; with
# totals = 1 each bar's total written above it (up to 24 bars); sub: a
# second title line (or '').
# datafile: one row per bar: label <TAB> one value per category [<TAB> total].
load plotdir.'/terminal.gp'
if (!exists('sub')) sub = ''
set title ttl.(strlen(sub) ? "\n".sub : '')
set xlabel xlab
set ylabel ylab
set style data histograms
set style histogram rowstacked
set style fill solid 0.9 border rgb 'white'
set boxwidth 0.8 relative
set yrange [0:ymax]
set grid noxtics ytics
# at most about 24 bar labels
step = nrows > 24 ? int(ceil(nrows / 24.0)) : 1
set xtics rotate by -45 noenhanced
if (!exists('totals')) totals = 0
set macros
sums = !totals || nrows > 24 ? '' : ", datafile using 0:(column(ncols + 2)):(sprintf('%.3g', column(ncols + 2))) with labels offset 0,0.8 font ',9' notitle"
plot for [i=1:ncols] datafile using (column(i + 1)):xtic(int($0) % step == 0 ? strcol(1) : '') \
         lc rgb sb_lc(word(colors, i)) title sb_field(cats, i), \
     hline with lines lw 2 dt 2 lc rgb 'black' title sprintf('%s %.4g', hlinettl, hline) @sums
