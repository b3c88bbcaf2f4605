// bench/llama2c_bench.cpp - what one call of the llama2.c reference adapter costs on the real
// aidreams260K checkpoint: the ratio that bounds every speculative speedup.
//
//   BM_Append/n        append of n tokens (n = 1..16) after a context of 32, then truncate(32).
//                      Each iteration also times a 1-token append (the reference), interleaved,
//                      so `ratio_to_1` = time(n) / time(1) is measured on the same machine state.
//   BM_Tree/shape      append_tree of a 2x2 / 4x2 / 4x2x2 / 8x2 tree (7 / 13 / 29 / 25 nodes incl.
//                      the root) + commit of a full-depth path, at context 32; interleaved with
//                      a chain append of the same node count (+ truncate) as the reference:
//                      `ratio_to_chain` = time(tree + commit) / time(chain of as many tokens).
//
// Context and tokens are run.c's reference ids (llama2c/engine/reference.hpp): a realistic context and
// realistic draft tokens. Counters: us (per call, this variant), ref_us (the interleaved
// reference), the ratio, and tokens/s (tokens fed per second). Reported time is manual (wall
// clock of the measured calls; the truncates between them are not timed).
//
//   cmake --preset bench && cmake --build --preset bench --target llama2c_bench
//   build/bench/bench/llama2c_bench --benchmark_min_time=0.1 --benchmark_repetitions=3 --benchmark_report_aggregates_only
//
// Skips (prints why, exits 0) when the checkpoint is not in SPECDEC_MODELS_DIR.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <specdec/tree/token_tree.hpp>

#include "bench/support/models.hpp"
#include "bench/support/timing.hpp"
#include "llama2c/engine/model.hpp"
#include "llama2c/engine/reference.hpp"

namespace {

namespace l2 = specdec::llama2c;
namespace sb = specdec::bench;
using specdec::token_id;

constexpr std::size_t context = 32;
constexpr std::size_t max_append = 16;  // BM_Append's largest n
constexpr std::string_view tree_shapes[] = {"2x2", "4x2", "4x2x2", "8x2"};

// Nodes of a full tree "k1xk2x...", the root included: 1 + k1 + k1 k2 + ...
constexpr std::size_t tree_nodes(std::string_view shape) {
  std::size_t nodes = 1, width = 1, factor = 0;
  for (const char c : shape) {
    if (c == 'x') {
      width *= factor;
      nodes += width;
      factor = 0;
    } else {
      factor = 10 * factor + static_cast<std::size_t>(c - '0');
    }
  }
  return nodes + width * factor;
}

constexpr std::size_t largest_tree() {
  std::size_t n = 0;
  for (const auto shape : tree_shapes) n = std::max(n, tree_nodes(shape));
  return n;
}

// Every token a benchmark reads lies inside the reference: the context, then BM_Append's tokens,
// BM_Tree's reference chain of as many tokens as its largest tree has nodes, and the tree tokens
// reference_ids[context + 1 + i % 16].
static_assert(tree_nodes("4x2x2") == 29 && tree_nodes("8x2") == 25);
static_assert(context + std::max({max_append, largest_tree(), std::size_t{1} + 16}) <=
                  l2::reference_ids.size(),
              "a benchmark reads past the end of the reference ids");

std::shared_ptr<const l2::weights>& shared_weights() {
  static std::shared_ptr<const l2::weights> w = l2::load_checkpoint(sb::checkpoint_path);
  return w;
}

// A model holding BOS + the first context - 1 reference ids.
std::unique_ptr<l2::model> model_at_context() {
  auto m = std::make_unique<l2::model>(shared_weights());
  std::vector<token_id> prompt{1};
  prompt.insert(prompt.end(), l2::reference_ids.begin(), l2::reference_ids.begin() + context - 1);
  std::vector<float> logits(prompt.size() * m->vocab_size());
  m->append(prompt, logits);
  return m;
}

void BM_Append(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  auto m = model_at_context();
  const std::span<const token_id> tokens(l2::reference_ids.data() + context, n);
  const std::span<const token_id> one(l2::reference_ids.data() + context, 1);
  std::vector<float> logits(n * m->vocab_size()), logits1(m->vocab_size());
  for (int i = 0; i < 20; ++i) {  // warm-up: scratch growth, caches
    m->append(tokens, logits);
    m->truncate(context);
  }
  sb::paired_timer<sb::wall_clock> timer;
  for (auto _ : state) {
    const double s = timer.subject([&] { m->append(tokens, logits); });
    m->truncate(context);
    timer.reference([&] { m->append(one, logits1); });
    m->truncate(context);
    benchmark::DoNotOptimize(logits.data());
    benchmark::DoNotOptimize(logits1.data());
    state.SetIterationTime(s);
  }
  timer.report(state, "ratio_to_1", true);
  state.counters["tokens/s"] = benchmark::Counter(
      static_cast<double>(n) * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

void BM_Tree(benchmark::State& state) {
  const std::string_view shape = tree_shapes[state.range(0)];
  state.SetLabel(std::string(shape));
  auto m = model_at_context();
  specdec::token_tree tree = specdec::token_tree::from_branching(shape, l2::reference_ids[context]);
  for (std::size_t i = 1; i < tree.size(); ++i)
    tree.set_token(i, l2::reference_ids[context + 1 + i % 16]);
  const std::size_t nodes = tree.size();
  if (nodes != tree_nodes(shape)) {  // the static_assert above counted the nodes this way
    state.SkipWithError("tree_nodes() disagrees with token_tree::from_branching");
    return;
  }
  // Commit the path to the last node: full depth, and the rows that move the farthest.
  const std::vector<std::int32_t> path = tree.path_to(nodes - 1);
  const std::span<const token_id> chain(l2::reference_ids.data() + context, nodes);
  std::vector<float> logits(nodes * m->vocab_size());
  for (int i = 0; i < 20; ++i) {
    m->append_tree(tree.tokens(), tree.parents(), logits);
    m->commit(path);
    m->truncate(context);
    m->append(chain, logits);
    m->truncate(context);
  }
  sb::paired_timer<sb::wall_clock> timer;
  for (auto _ : state) {
    const double s = timer.subject([&] {
      m->append_tree(tree.tokens(), tree.parents(), logits);
      m->commit(path);
    });
    m->truncate(context);
    timer.reference([&] { m->append(chain, logits); });
    m->truncate(context);
    benchmark::DoNotOptimize(logits.data());
    state.SetIterationTime(s);
  }
  state.counters["nodes"] = static_cast<double>(nodes);
  timer.report(state, "ratio_to_chain", true);
  state.counters["tokens/s"] =
      benchmark::Counter(static_cast<double>(nodes) * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate);
}

}  // namespace

int main(int argc, char** argv) {
  if (sb::skip_without("llama2c_bench", {sb::checkpoint_path})) return 0;
  benchmark::RegisterBenchmark("BM_Append", BM_Append)
      ->DenseRange(1, static_cast<int>(max_append))
      ->UseManualTime();
  benchmark::RegisterBenchmark("BM_Tree", BM_Tree)
      ->DenseRange(0, static_cast<int>(std::size(tree_shapes)) - 1)
      ->UseManualTime();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
