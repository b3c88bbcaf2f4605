# Generated tokens per target call against K, per drafter (greedy): data/cli_runs.json.
load 'docs/plots/style.gp'
set title 'Tokens per target call against K (aidreams260K, greedy)'
set xlabel 'K (draft tokens per target call)'
set ylabel 'tokens per target call'
set xrange [0.5:8.5]
set yrange [0.9:*]
set xtics 1
set key top left
plot tmp.'/tpc_layers1.tsv' using 1:2 with linespoints ls 1 title 'first 1 layer', \
     tmp.'/tpc_layers2.tsv' using 1:2 with linespoints ls 2 title 'first 2 layers', \
     tmp.'/tpc_layers3.tsv' using 1:2 with linespoints ls 3 title 'first 3 layers', \
     tmp.'/tpc_ngram.tsv'   using 1:2 with linespoints ls 4 title 'prompt lookup (quoting prompts)'
