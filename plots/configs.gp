# plots/configs.gp: a strategy's configs as a layers x dims heat map: a row
# per group of ops (an op repeated over layers with one config once), a
# column per iteration dim name, the cell's colour the split count (log 2),
# its number written where above 1; blank where the op has no such dim
# (`plot --search`).
# In: plotdir, term, outfile, datafile, ttl, xlabs, ylabs ('|'-separated
# column and row labels, rows top first), ncols, nrows, cmax (log2 of the
# largest split), width, height. datafile: x <TAB> y <TAB> log2 split
# <TAB> split.
load plotdir.'/terminal.gp'
set title ttl
unset grid
unset key
set xrange [-0.5:ncols - 0.5]
set yrange [-0.5:nrows - 0.5]
set xtics () rotate by -30 noenhanced
set for [x=1:ncols] xtics add (sb_field(xlabs, x) x - 1)
set ytics () noenhanced font ',9'
set for [r=1:nrows] ytics add (sb_field(ylabs, r) nrows - r)
set tics scale 0
set palette defined (0 '#e6edf5', 1 '#c6dbef', 3 '#6baed6', 5 '#2171b5', 8 '#08306b')
set cbrange [0:cmax]
set cbtics ()
set for [k=0:int(cmax)] cbtics add (sprintf('%d', 2**k) k)
set cblabel 'devices the dim is split over'
plot datafile using 1:2:(0.5):(0.5):3 with boxxyerror fs solid 1.0 border rgb 'white' \
         fc palette title 'split', \
     datafile using 1:2:($4 > 1 && $3 <= 0.55 * cmax ? sprintf('%d', $4) : '') with labels \
         font ',8' tc rgb 'black' notitle, \
     datafile using 1:2:($3 > 0.55 * cmax ? sprintf('%d', $4) : '') with labels \
         font ',8' tc rgb 'white' notitle
