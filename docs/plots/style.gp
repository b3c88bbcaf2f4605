# Shared look of the figures: SVG, white background, a light grid.
set terminal svg size 720,420 dynamic enhanced font 'Helvetica,13' background '#ffffff'
set output out
set grid ytics lc rgb '#dddddd' lt 1
set border 3
set tics nomirror
set key top right box lc rgb '#bbbbbb'
set style line 1 lc rgb '#1b9e77' lw 2 pt 7 ps 0.8
set style line 2 lc rgb '#d95f02' lw 2 pt 5 ps 0.8
set style line 3 lc rgb '#7570b3' lw 2 pt 9 ps 0.9
set style line 4 lc rgb '#e7298a' lw 2 pt 13 ps 0.9
