# plots/scaling.gp: predicted tokens per second against devices over several
# searches of one model, one line per algorithm; with mfu = 1 the MFU (%)
# of each on the right axis, dashed, in the same colour (`plot --scaling`).
# In: plotdir, term, outfile, datafile, algos (one data block per
# algorithm), colors (palette number per algorithm), ttl, pmin, pmax, mfu,
# ylab, over (1: some point is over the device's memory). datafile blocks:
# p <TAB> tokens/s <TAB> MFU % (NaN: unknown) <TAB> 1 when over memory.
load plotdir.'/terminal.gp'
set title ttl
set xlabel 'devices (P)'
set ylabel ylab
set logscale x 2
set logscale y
set xrange [pmin/1.4:pmax*1.4]
set xtics ()
set for [k=int(floor(log(pmin) / log(2) + 0.01)):int(ceil(log(pmax) / log(2) - 0.01))] \
    xtics add (sprintf('%d', 2**k) 2**k)
set format y '%.0s%c'
if (mfu) {
    set y2label 'MFU (%)'
    set y2range [0:100]
    set y2tics
}
# points over the device's memory (over = 1): crossed out and labelled
set macros
overmem = !over ? '' : ", for [i=1:words(algos)] datafile index (i-1) using 1:($4 > 0 ? $2 : NaN) with points pt 2 ps 3 lw 2 lc rgb 'black' notitle, for [i=1:words(algos)] datafile index (i-1) using 1:($4 > 0 ? $2 : NaN):('over memory') with labels offset 0,1.4 font ',9' notitle"
mfulines = !mfu ? '' : ", for [i=1:words(algos)] datafile index (i-1) using 1:3 axes x1y2 with linespoints lw 1.5 dt 2 lc rgb sb_lc(word(colors, i)) pt sb_pt(word(colors, i)) ps 0.9 title word(algos, i).' MFU'"
plot for [i=1:words(algos)] datafile index (i-1) using 1:2 with linespoints lw 2 \
         lc rgb sb_lc(word(colors, i)) pt sb_pt(word(colors, i)) ps 1.2 title word(algos, i) \
     @mfulines @overmem
