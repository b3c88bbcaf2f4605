# Acceptance rate at each draft position (K = 8, greedy), per drafter: data/cli_runs.json.
load 'docs/plots/style.gp'
set title 'Acceptance by draft position (aidreams260K, greedy, K = 8)'
set xlabel 'draft position'
set ylabel 'accepted / drafted at that position'
set xrange [0.5:8.5]
set yrange [0:1]
set xtics 1
plot tmp.'/acc_layers1.tsv' using 1:2 with linespoints ls 1 title 'first 1 layer', \
     tmp.'/acc_layers2.tsv' using 1:2 with linespoints ls 2 title 'first 2 layers', \
     tmp.'/acc_layers3.tsv' using 1:2 with linespoints ls 3 title 'first 3 layers', \
     tmp.'/acc_ngram.tsv'   using 1:2 with linespoints ls 4 title 'prompt lookup (quoting prompts)'
