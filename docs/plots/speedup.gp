# Measured and predicted speed-up over plain decoding per drafter, each at its best greedy
# configuration, on aidreams260K reshaped to 110M (memory-bound): data/speedup.json.
load 'docs/plots/style.gp'
set terminal svg size 820,460 dynamic enhanced font 'Helvetica,13' background '#ffffff'
set output out
set title sprintf('Speed-up over plain decoding, 110M-shape target (2 cores)%s', note)
set ylabel 'tokens/s over plain decoding'
set datafile separator "\t"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set yrange [0:*]
set xtics rotate by 30 right scale 0 font ',11'
set bmargin 7
set key outside right top
set arrow from graph 0, first 1 to graph 1, first 1 nohead lc rgb '#555555' dt 2
plot tmp.'/speedup.tsv' using 2:xtic(1) lc rgb '#1b9e77' title 'measured, greedy', \
     '' using 3 lc rgb '#a6dba0' title 'predicted, greedy', \
     '' using 4 lc rgb '#7570b3' title 'measured, t = 0.8', \
     '' using 5 lc rgb '#cbc9e2' title 'predicted, t = 0.8'
