# plots/terminal.gp: output terminal and common look of every figure; loaded
# by the other scripts (`load plotdir.'/terminal.gp'`).
# In: term ('png' or 'svg'), outfile.
if (term eq 'svg') {
    set terminal svg size 820,560 dynamic enhanced font 'sans,12' background rgb 'white'
} else {
    set terminal pngcairo size 820,560 enhanced font 'sans,10'
}
set output outfile
set grid
set key outside right top noenhanced
set title noenhanced
