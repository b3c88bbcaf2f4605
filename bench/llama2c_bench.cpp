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
// Counters: us (per call, this variant), ref_us (the interleaved reference), the ratio, and
// tokens/s (tokens fed per second). Reported time is manual (wall clock of the measured calls).
//
//   cmake -S . -B build/e2e -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS=-march=native
//         -DSPECDEC_BUILD_BENCHMARKS=ON
//   cmake --build build/e2e --target llama2c_bench
//   build/e2e/bench/llama2c_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only
//
// Skips (prints why, exits 0) when the checkpoint is not in SPECDEC_MODELS_DIR.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <specdec/tree/token_tree.hpp>

#include "llama2c/model.hpp"

#ifndef SPECDEC_MODELS_DIR
#define SPECDEC_MODELS_DIR "../shared/models"
#endif

namespace {

namespace l2 = specdec::llama2c;
using specdec::token_id;
using clock_type = std::chrono::steady_clock;

constexpr std::size_t context = 32;

const std::filesystem::path checkpoint_path =
    std::filesystem::path(SPECDEC_MODELS_DIR) / "aidreams260K.bin";

// The README's reference greedy ids: a realistic context and realistic draft tokens.
constexpr token_id reference_ids[] = {
    303, 281, 269, 435, 447, 328, 446, 299, 303, 266, 358, 430, 312, 379, 441, 260, 446, 262,
    421, 392, 275, 280, 302, 450, 405, 403, 399, 448, 429, 465, 265, 434, 317, 431, 434, 289,
    408, 326, 446, 262, 279, 438, 349, 261, 446, 299, 303, 384, 467, 407, 446, 299, 303, 266};

std::shared_ptr<const l2::weights>& shared_weights() {
  static std::shared_ptr<const l2::weights> w = l2::load_checkpoint(checkpoint_path);
  return w;
}

// A model holding BOS + the first context - 1 reference ids.
std::unique_ptr<l2::model> model_at_context() {
  auto m = std::make_unique<l2::model>(shared_weights());
  std::vector<token_id> prompt{1};
  prompt.insert(prompt.end(), reference_ids, reference_ids + context - 1);
  std::vector<float> logits(prompt.size() * m->vocab_size());
  m->append(prompt, logits);
  return m;
}

double seconds(clock_type::duration d) { return std::chrono::duration<double>(d).count(); }

void BM_Append(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  auto m = model_at_context();
  const std::span<const token_id> tokens(reference_ids + context, n);
  const std::span<const token_id> one(reference_ids + context, 1);
  std::vector<float> logits(n * m->vocab_size()), logits1(m->vocab_size());
  for (int i = 0; i < 20; ++i) {  // warm-up: scratch growth, caches
    m->append(tokens, logits);
    m->truncate(context);
  }
  double t_n = 0.0, t_1 = 0.0;
  for (auto _ : state) {
    const auto a = clock_type::now();
    m->append(tokens, logits);
    const auto b = clock_type::now();
    m->truncate(context);
    m->append(one, logits1);
    const auto c = clock_type::now();
    m->truncate(context);
    benchmark::DoNotOptimize(logits.data());
    benchmark::DoNotOptimize(logits1.data());
    state.SetIterationTime(seconds(b - a));
    t_n += seconds(b - a);
    t_1 += seconds(c - b);
  }
  const auto iters = static_cast<double>(state.iterations());
  state.counters["us"] = 1e6 * t_n / iters;
  state.counters["ref_us"] = 1e6 * t_1 / iters;
  state.counters["ratio_to_1"] = t_n / t_1;
  state.counters["tokens/s"] =
      benchmark::Counter(static_cast<double>(n) * iters, benchmark::Counter::kIsRate);
}

const char* const tree_shapes[] = {"2x2", "4x2", "4x2x2", "8x2"};

void BM_Tree(benchmark::State& state) {
  const char* shape = tree_shapes[state.range(0)];
  state.SetLabel(shape);
  auto m = model_at_context();
  specdec::token_tree tree = specdec::token_tree::from_branching(shape, reference_ids[context]);
  for (std::size_t i = 1; i < tree.size(); ++i)
    tree.set_token(i, reference_ids[context + 1 + i % 16]);
  const std::size_t nodes = tree.size();
  // Commit the path to the last node: full depth, and the rows that move the farthest.
  const std::vector<std::int32_t> path = tree.path_to(nodes - 1);
  const std::span<const token_id> chain(reference_ids + context, nodes);
  std::vector<float> logits(nodes * m->vocab_size());
  for (int i = 0; i < 20; ++i) {
    m->append_tree(tree.tokens(), tree.parents(), logits);
    m->commit(path);
    m->truncate(context);
    m->append(chain, logits);
    m->truncate(context);
  }
  double t_tree = 0.0, t_chain = 0.0;
  for (auto _ : state) {
    const auto a = clock_type::now();
    m->append_tree(tree.tokens(), tree.parents(), logits);
    m->commit(path);
    const auto b = clock_type::now();
    m->truncate(context);
    m->append(chain, logits);
    const auto c = clock_type::now();
    m->truncate(context);
    benchmark::DoNotOptimize(logits.data());
    state.SetIterationTime(seconds(b - a));
    t_tree += seconds(b - a);
    t_chain += seconds(c - b);
  }
  const auto iters = static_cast<double>(state.iterations());
  state.counters["nodes"] = static_cast<double>(nodes);
  state.counters["us"] = 1e6 * t_tree / iters;
  state.counters["ref_us"] = 1e6 * t_chain / iters;
  state.counters["ratio_to_chain"] = t_tree / t_chain;
  state.counters["tokens/s"] =
      benchmark::Counter(static_cast<double>(nodes) * iters, benchmark::Counter::kIsRate);
}

}  // namespace

int main(int argc, char** argv) {
  if (!std::filesystem::exists(checkpoint_path)) {
    std::printf("llama2c_bench: skipped: %s not found (set SPECDEC_MODELS_DIR)\n",
                checkpoint_path.string().c_str());
    return 0;
  }
  benchmark::RegisterBenchmark("BM_Append", BM_Append)->DenseRange(1, 16)->UseManualTime();
  benchmark::RegisterBenchmark("BM_Tree", BM_Tree)->DenseRange(0, 3)->UseManualTime();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
