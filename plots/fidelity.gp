# plots/fidelity.gp: predicted cost against measured median step time of
# every strategy of one (model, P), log-log, Spearman's rho in the title.
# In: plotdir, term, outfile, datafile, kinds, ttl.
# datafile blocks (one per kind): predicted FLOP <TAB> median step s.
load plotdir.'/terminal.gp'
set title ttl
set xlabel 'predicted cost per step (FLOP, PaSE cost model)'
set ylabel 'measured median step time (s)'
set logscale xy
set offsets graph 0.05, graph 0.05, graph 0.05, graph 0.05
plot for [i=1:words(kinds)] datafile index (i-1) using 1:2 with points pt 7 ps 1.5 \
         title word(kinds, i)
