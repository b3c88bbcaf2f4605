# Total throughput of batched decoding against the batch size, per drafter and K, greedy, on
# aidreams260K reshaped to 110M served by llama2c::batch_model: data/batch.json (batch_bench).
load 'docs/plots/style.gp'
set terminal svg size 820,480 dynamic enhanced font 'Helvetica,13' background '#ffffff'
set output out
set title sprintf('Batched decoding, 110M-shape target (2 cores), greedy%s', note)
set xlabel 'sequences in the batch'
set ylabel 'tokens/s over all sequences'
set datafile separator "\t"
set logscale x 2
set xtics (1, 2, 4, 8, 16)
set xrange [0.85:18]
set yrange [0:*]
set key outside right top
set style line 5 lc rgb '#666666' lw 2.5 pt 7 ps 0.8
set style line 6 lc rgb '#66a61e' lw 2 pt 11 ps 0.9
set style line 7 lc rgb '#e6ab02' lw 2 pt 15 ps 0.9
plot tmp.'/batch.tsv' using 1:2 with linespoints ls 5 title 'plain (K = 0)', \
     '' using 1:3 with linespoints ls 1 dt 2 title 'n-gram K = 2', \
     '' using 1:4 with linespoints ls 1 dt 3 title 'n-gram K = 4', \
     '' using 1:5 with linespoints ls 1 title 'n-gram K = 8', \
     '' using 1:6 with linespoints ls 2 dt 2 title 'draft model K = 2', \
     '' using 1:7 with linespoints ls 2 dt 3 title 'draft model K = 4', \
     '' using 1:8 with linespoints ls 2 title 'draft model K = 8', \
     '' using 1:9 with linespoints ls 6 title 'n-gram, K policy', \
     '' using 1:10 with linespoints ls 7 title 'draft model, K policy'
