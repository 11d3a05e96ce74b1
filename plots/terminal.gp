# plots/terminal.gp: output terminal, common look and the one palette of
# every figure; loaded by the other scripts (`load plotdir.'/terminal.gp'`).
# In: term ('png' or 'svg'), outfile; width and height (pixels) if a figure
# wants other than 820 x 560.
if (!exists('width')) width = 820
if (!exists('height')) height = 560
if (term eq 'svg') {
    set terminal svg size width,height dynamic enhanced font 'sans,12' background rgb 'white'
} else {
    set terminal pngcairo size width,height enhanced font 'sans,10'
}
set output outfile
set grid
set key outside right top noenhanced
set title noenhanced

# The palette: series number i (1, 2, ...; plot.c gives each strategy kind
# and algorithm its number from one fixed order, plots/style.c) is drawn in
# colour sb_lc(i) with marker sb_pt(i). 20 colours apart from each other
# (Tableau 20's strong half, then its light half darkened); marker cycles of
# 10, shifted by one every 20 series, so no two series of a figure share
# both colour and marker, and the first 20 never share a colour.
sb_ncolors = 20
sb_colors = '#1f77b4 #d62728 #2ca02c #ff7f0e #9467bd #8c564b #e377c2 #17becf #7f7f7f #bcbd22 '.\
            '#0b3d91 #f4a582 #00441b #fdd000 #c51b7d #4d2600 #66c2a5 #000000 #a6761d #80b1d3'
sb_pts = '7 5 9 13 11 6 4 8 12 10'
sb_lc(i) = word(sb_colors, (int(i + 0) - 1) % sb_ncolors + 1)
sb_pt(i) = word(sb_pts, ((int(i + 0) - 1) + (int(i + 0) - 1) / sb_ncolors) % 10 + 1) + 0
# marker of a family (fidelity): 1 baselines (square), 2 candidates (circle),
# 3 random (triangle)
sb_family_pt(f) = word('5 7 9', int(f + 0)) + 0
# field i (1-based) of a '|'-separated list of labels (labels with blanks)
sb_field(s, i) = (i <= 1) ? (strstrt(s, '|') ? s[1:strstrt(s, '|') - 1] : s) \
                          : sb_field(s[strstrt(s, '|') + 1:], i - 1)
