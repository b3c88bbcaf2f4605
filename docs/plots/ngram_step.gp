# Cost of one n-gram drafter step (propose K = 8 + accept) against context length, beside a naive
# rescan of the same context: data/ngram_bench.json (medians, CPU time).
load 'docs/plots/style.gp'
set title 'Prompt lookup: cost per step against context (K = 8)'
set xlabel 'context (tokens)'
set ylabel 'ns per step (CPU time)'
set logscale xy
set format x '%.0s%c'
set format y '10^{%L}'
set xrange [700:1500000]
set key top left
plot tmp.'/ngram.tsv' using 1:2 with linespoints ls 1 title 'incremental index (ngram\_drafter)', \
     '' using 1:3 with linespoints ls 2 title 'naive rescan'
