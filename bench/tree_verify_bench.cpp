// bench/tree_verify_bench.cpp - cost of verify_tree per tree node at V = 32000, temperature 1,
// against one log-sum-exp pass over the same rows measured in the same run.
//
//   cmake --preset bench && cmake --build --preset bench --target tree_verify_bench
//   build/bench/bench/tree_verify_bench --benchmark_min_time=0.3
//
// Counters (thread CPU time): ns_per_node (verification time / tree nodes), lse_ns_per_row
// (specdec::log_sum_exp over one row, measured before and after the loop), ratio (the two
// divided: how many log-sum-exp passes one tree node of verification costs), ratio_visited (the
// same per node actually walked), accepted (mean accepted path length), visited (mean nodes
// whose row was warped = accepted + 1).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <vector>

#include <specdec/math/sample.hpp>
#include <specdec/math/softmax.hpp>
#include <specdec/math/warp.hpp>
#include <specdec/tree/token_tree.hpp>
#include <specdec/verify/multi_candidate.hpp>

#include "bench/support/timing.hpp"

namespace {

using specdec::token_id;

constexpr std::size_t vocab = 32000;
constexpr std::size_t instances = 8;  // distinct random trees cycled through
const char* const shapes[] = {"1", "2x1", "4x1", "2x2", "4x2x2", "8x2"};

struct instance {
  specdec::token_tree tree;
  specdec::row_matrix target, q;
};

// Draft logits ~ N(0, 2^2) per node; target = draft + N(0, 1): a draft that agrees in part.
// Children are drawn from the draft's q as `draw` says (deterministic: the draft's top-k).
instance make_instance(const char* shape, specdec::candidate_draw draw, std::uint64_t seed) {
  std::mt19937_64 eng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  instance in{specdec::token_tree::from_branching(shape), {}, {}};
  const auto n = static_cast<Eigen::Index>(in.tree.size());
  const auto v = static_cast<Eigen::Index>(vocab);
  specdec::row_matrix draft(n, v);
  in.target.resize(n, v);
  for (Eigen::Index i = 0; i < n; ++i)
    for (Eigen::Index t = 0; t < v; ++t) {
      draft(i, t) = 2.0f * normal(eng);
      in.target(i, t) = draft(i, t) + normal(eng);
    }
  in.q = specdec::row_matrix::Zero(n, v);
  specdec::rng gen(seed);
  std::vector<float> pool(vocab);
  for (std::size_t node = 0; node < in.tree.size(); ++node) {
    if (in.tree.is_leaf(node)) continue;
    const auto row = static_cast<Eigen::Index>(node);
    specdec::softmax(std::span<const float>(draft.row(row).data(), vocab),
                     std::span<float>(in.q.row(row).data(), vocab));
    std::copy_n(in.q.row(row).data(), vocab, pool.begin());
    for (const std::int32_t child : in.tree.children(node)) {
      const token_id x = draw == specdec::candidate_draw::deterministic ? specdec::argmax(pool)
                                                                         : specdec::sample(pool, gen);
      if (draw != specdec::candidate_draw::iid) pool[static_cast<std::size_t>(x)] = 0.0f;
      in.tree.set_token(static_cast<std::size_t>(child), x);
    }
  }
  if (draw == specdec::candidate_draw::deterministic) in.q.resize(0, v);
  return in;
}

// CPU time of this thread in ns: both sides of the ratio use it, so other processes sharing the
// cores disturb the ratio less than they would wall time.
double thread_ns() { return 1e9 * specdec::bench::thread_cpu_clock::now(); }

// One log-sum-exp pass per row over all rows of the instances, timed for at least 50 ms.
double lse_ns_per_row(const std::vector<instance>& ins) {
  std::size_t rows = 0;
  double sink = 0.0;
  const double start = thread_ns();
  double elapsed = 0.0;
  while (elapsed < 50e6) {
    for (const auto& in : ins)
      for (Eigen::Index i = 0; i < in.target.rows(); ++i, ++rows)
        sink += specdec::log_sum_exp(std::span<const float>(in.target.row(i).data(), vocab));
    elapsed = thread_ns() - start;
  }
  benchmark::DoNotOptimize(sink);
  return elapsed / static_cast<double>(rows);
}

void BM_TreeVerify(benchmark::State& state) {
  const char* shape = shapes[state.range(0)];
  const auto draw = static_cast<specdec::candidate_draw>(state.range(1));
  std::vector<instance> ins;
  for (std::size_t s = 0; s < instances; ++s) ins.push_back(make_instance(shape, draw, 1000 + s));
  const double lse_before = lse_ns_per_row(ins);
  specdec::sampling_params sp;  // temperature 1, no filters
  specdec::rng gen(7);
  specdec::tree_verify_workspace ws;
  specdec::tree_verify_result r;
  std::size_t calls = 0, accepted = 0, visited = 0;
  const double start = thread_ns();
  for (auto _ : state) {
    const auto& in = ins[calls++ % instances];
    specdec::verify_tree(in.tree, specdec::logits_view(in.target.data(), in.target.rows(), in.target.cols()),
                         specdec::logits_view(in.q.data(), in.q.rows(), in.q.cols()), draw, sp, gen,
                         ws, r);
    accepted += r.accepted.size();
    visited += r.accepted.size() + 1;
    benchmark::DoNotOptimize(r.next);
  }
  const double ns = thread_ns() - start;
  const double lse = 0.5 * (lse_before + lse_ns_per_row(ins));  // reference before and after
  const double nodes = static_cast<double>(ins[0].tree.size());
  const double per_node = ns / static_cast<double>(calls) / nodes;
  state.SetLabel(std::string(shape) + (draw == specdec::candidate_draw::iid ? " iid"
                                       : draw == specdec::candidate_draw::without_replacement
                                           ? " without-replacement"
                                           : " deterministic"));
  state.counters["nodes"] = nodes;
  state.counters["ns_per_node"] = per_node;
  state.counters["lse_ns_per_row"] = lse;
  state.counters["ratio"] = per_node / lse;
  state.counters["ratio_visited"] =
      ns / static_cast<double>(visited) / lse;  // per node actually walked
  state.counters["accepted"] = static_cast<double>(accepted) / static_cast<double>(calls);
  state.counters["visited"] = static_cast<double>(visited) / static_cast<double>(calls);
}

void tree_args(benchmark::internal::Benchmark* b) {
  for (int draw = 0; draw < 3; ++draw)
    for (int s = 0; s < static_cast<int>(std::size(shapes)); ++s) b->Args({s, draw});
}

}  // namespace

BENCHMARK(BM_TreeVerify)->Apply(tree_args)->Unit(benchmark::kMicrosecond);

BENCHMARK_MAIN();
