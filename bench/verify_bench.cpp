// bench/verify_bench.cpp - the chain verifiers against the cheapest pass over the same rows.
//
//   BM_VerifyGreedy/K/V             verify_greedy over K + 1 rows, every draft accepted (all rows
//                                   read); reference: Eigen maxCoeff() of each of the K + 1 rows.
//   BM_VerifyRejection/case/K/V     verify_rejection over K + 1 rows, every draft accepted (K
//                                   acceptance tests + the bonus draw from the last row);
//                                   reference: one log-sum-exp pass per row (Eigen maxCoeff(),
//                                   then (x - max).exp().sum()).
//                                   case 0: temperature 1, full q rows   1: temperature 1, one-hot
//                                   2: top_p 0.9, full q   3: top_p 0.9, one-hot
//                                   4: top_k 50, full q    5: top_k 50, one-hot
//   BM_VerifyBlock/case/K/V         verify_block over the same rows and full q rows (cases 0, 2,
//                                   4 above; one-hot drafts go to verify_rejection), every draft
//                                   kept (q(x) < p(x) keeps every weight at 1, so every stop
//                                   score is 1); same reference. Block verification warps every
//                                   row and reads q's rows in full, so its ratio is the cost of
//                                   judging the block jointly.
//   BM_VerifyCoupled/case/K/V       verify_coupled (coupled sampling: every row's token drawn by
//                                   the exponential race under position-keyed noise) over K + 1
//                                   rows whose drafts are those draws, so every draft is kept and
//                                   every row read (cases 0, 2, 4 above); reference:
//                                   verify_rejection on the same rows and drafts with q = p
//                                   (full rows, every draft kept), the cost the coupled rule
//                                   replaces. ratio is coupled over rejection.
//
// Each iteration runs the reference, then the subject, on the same rows, both timed with the
// thread's CPU clock (bench/support/timing.hpp, paired_timer); the reported time is the subject's
// (manual time), and the counters are ref_us (the reference per call) and ratio = sum(subject) /
// sum(reference) over the same iterations, so slow phases of the shared machine hit both sides
// alike.
//
// Rows: logits = 3 * N(0, 1), plus four peaked tokens at the row's max + 4, + 2, + 1, + 0.5; the
// draft token of a row is its top peaked token. Full q rows are warp() of the same logits with the
// draft token lowered by 1 (so q(x) < p(x)). All-accepted is made deterministic by searching, in
// setup, 64 seeds under which every draft is accepted and reseeding the rng with the next one
// before each call (reseeding costs four splitmix steps); `accepted` reports what the calls
// accepted, `support` the number of tokens with p > 0 in the last row.
//
//   cmake --preset bench && cmake --build --preset bench --target verify_bench
//   build/bench/bench/verify_bench --benchmark_repetitions=5
//   --benchmark_report_aggregates_only=true --benchmark_min_time=0.2
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <span>
#include <specdec/verify/block.hpp>
#include <specdec/verify/coupled.hpp>
#include <specdec/verify/greedy.hpp>
#include <specdec/verify/rejection.hpp>
#include <vector>

#include "bench/support/timing.hpp"

namespace {

namespace sb = specdec::bench;
using specdec::token_id;

struct rows {
  std::size_t n = 0, v = 0;
  std::vector<float> logits;     // n x v
  std::vector<token_id> drafts;  // n - 1, the top peaked token of each row
  specdec::logits_view view() const {
    return {logits.data(), static_cast<Eigen::Index>(n), static_cast<Eigen::Index>(v)};
  }
  std::span<const float> row(std::size_t i) const { return {logits.data() + i * v, v}; }
};

rows make_rows(std::size_t n, std::size_t v, std::uint64_t seed) {
  rows r;
  r.n = n;
  r.v = v;
  r.logits.resize(n * v);
  std::mt19937_64 g(seed);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::uniform_int_distribution<std::size_t> pick(0, v - 1);
  for (std::size_t i = 0; i < n; ++i) {
    float* row = r.logits.data() + i * v;
    float mx = -1e30f;
    for (std::size_t t = 0; t < v; ++t) {
      row[t] = normal(g);
      mx = std::max(mx, row[t]);
    }
    const float lift[4] = {4.0f, 2.0f, 1.0f, 0.5f};
    std::size_t top = 0;
    for (int j = 0; j < 4; ++j) {
      const std::size_t t = pick(g);
      row[t] = mx + lift[j];
      if (j == 0) top = t;
    }
    if (i + 1 < n) r.drafts.push_back(static_cast<token_id>(top));
  }
  return r;
}

// Reference for greedy: the max of each row, one streaming pass.
float reference_max(const rows& r) {
  float acc = 0.0f;
  for (std::size_t i = 0; i < r.n; ++i) {
    const auto row = r.row(i);
    acc += Eigen::Map<const Eigen::ArrayXf>(row.data(), static_cast<Eigen::Index>(row.size()))
               .maxCoeff();
  }
  return acc;
}

// Reference for sampling: log-sum-exp of each row (max pass, then exp-sum pass).
double reference_lse(const rows& r) {
  double acc = 0.0;
  for (std::size_t i = 0; i < r.n; ++i) {
    const auto row = r.row(i);
    const Eigen::Map<const Eigen::ArrayXf> a(row.data(), static_cast<Eigen::Index>(row.size()));
    const float m = a.maxCoeff();
    acc += static_cast<double>(m) + std::log(static_cast<double>((a - m).exp().sum()));
  }
  return acc;
}

void BM_VerifyGreedy(benchmark::State& state) {
  const auto k = static_cast<std::size_t>(state.range(0));
  const auto v = static_cast<std::size_t>(state.range(1));
  const rows r = make_rows(k + 1, v, 7 * k + v);
  // The drafts are each row's top token, its argmax: all accepted.
  if (specdec::verify_greedy(r.view(), r.drafts).accepted != k) {
    state.SkipWithError("a draft is not its row's argmax");
    return;
  }
  sb::paired_timer<sb::thread_cpu_clock> timer;
  std::size_t accepted = 0;
  for (auto _ : state) {
    timer.reference([&] { benchmark::DoNotOptimize(reference_max(r)); });
    specdec::verify_result res;
    const double s = timer.subject([&] {
      res = specdec::verify_greedy(r.view(), r.drafts);
      benchmark::DoNotOptimize(res);
    });
    accepted += res.accepted;
    state.SetIterationTime(s);
  }
  timer.report(state);
  state.counters["accepted"] =
      static_cast<double>(accepted) / static_cast<double>(state.iterations());
}

// The sampling of a case: temperature 1, plus top_p 0.9 (cases 2, 3) or top_k 50 (cases 4, 5).
specdec::sampling_params case_params(std::int64_t mode) {
  specdec::sampling_params sp;
  sp.temperature = 1.0f;
  if (mode / 2 == 1) sp.top_p = 0.9f;
  if (mode / 2 == 2) sp.top_k = 50;
  return sp;
}

// Full q rows: the warped distribution of the same logits with the draft token lowered by 1.
specdec::row_matrix lowered_q(const rows& r, const specdec::sampling_params& sp) {
  const std::size_t k = r.drafts.size();
  specdec::row_matrix q(static_cast<Eigen::Index>(k), static_cast<Eigen::Index>(r.v));
  std::vector<float> lowered(r.v);
  for (std::size_t i = 0; i < k; ++i) {
    const auto row = r.row(i);
    lowered.assign(row.begin(), row.end());
    lowered[static_cast<std::size_t>(r.drafts[i])] -= 1.0f;
    specdec::warp(lowered, sp, std::span<float>(q.row(static_cast<Eigen::Index>(i)).data(), r.v));
  }
  return q;
}

void BM_VerifyRejection(benchmark::State& state) {
  const auto mode = state.range(0);
  const auto k = static_cast<std::size_t>(state.range(1));
  const auto v = static_cast<std::size_t>(state.range(2));
  const bool one_hot = mode % 2 == 1;
  const specdec::sampling_params sp = case_params(mode);
  const rows r = make_rows(k + 1, v, 7 * k + v);
  const specdec::row_matrix q =
      one_hot ? specdec::row_matrix(0, static_cast<Eigen::Index>(v)) : lowered_q(r, sp);
  const specdec::logits_view qv(q.data(), q.rows(), q.cols());
  specdec::rejection_workspace ws;
  specdec::rng gen;
  // 64 seeds under which every draft is accepted; iterations cycle through them, so the time is
  // the mean over draws u that accept everything (with top-p some of them need the exact p(x)).
  std::vector<std::uint64_t> seeds;
  for (std::uint64_t s = 1; s < 1000000 && seeds.size() < 64; ++s) {
    gen.reseed(s);
    if (specdec::verify_rejection(r.view(), r.drafts, qv, sp, gen, ws).accepted == k)
      seeds.push_back(s);
  }
  if (seeds.size() < 64) {
    state.SkipWithError("too few seeds accept every draft");
    return;
  }
  // Nucleus size of the last row, for the record.
  std::vector<float> p(v);
  specdec::warp(r.row(k), sp, p);
  std::size_t support = 0;
  for (float x : p) support += x > 0.0f;

  sb::paired_timer<sb::thread_cpu_clock> timer;
  std::size_t accepted = 0, calls = 0;
  for (auto _ : state) {
    timer.reference([&] { benchmark::DoNotOptimize(reference_lse(r)); });
    specdec::verify_result res;
    const double s = timer.subject([&] {
      gen.reseed(seeds[calls % seeds.size()]);  // inside the subject's time, as documented
      res = specdec::verify_rejection(r.view(), r.drafts, qv, sp, gen, ws);
      benchmark::DoNotOptimize(res);
    });
    accepted += res.accepted;
    ++calls;
    state.SetIterationTime(s);
  }
  timer.report(state);
  state.counters["accepted"] = static_cast<double>(accepted) / static_cast<double>(calls);
  state.counters["support"] = static_cast<double>(support);
}

void BM_VerifyBlock(benchmark::State& state) {
  const auto mode = state.range(0);
  const auto k = static_cast<std::size_t>(state.range(1));
  const auto v = static_cast<std::size_t>(state.range(2));
  const specdec::sampling_params sp = case_params(mode);
  const rows r = make_rows(k + 1, v, 7 * k + v);
  const specdec::row_matrix q = lowered_q(r, sp);
  const specdec::logits_view qv(q.data(), q.rows(), q.cols());
  specdec::block_workspace ws;
  specdec::rng gen(1);
  if (specdec::verify_block(r.view(), r.drafts, qv, sp, gen, ws).accepted != k) {
    state.SkipWithError("a draft was not kept");
    return;
  }
  sb::paired_timer<sb::thread_cpu_clock> timer;
  std::size_t accepted = 0, calls = 0;
  for (auto _ : state) {
    timer.reference([&] { benchmark::DoNotOptimize(reference_lse(r)); });
    specdec::verify_result res;
    const double s = timer.subject([&] {
      res = specdec::verify_block(r.view(), r.drafts, qv, sp, gen, ws);
      benchmark::DoNotOptimize(res);
    });
    accepted += res.accepted;
    ++calls;
    state.SetIterationTime(s);
  }
  timer.report(state);
  state.counters["accepted"] = static_cast<double>(accepted) / static_cast<double>(calls);
}

void BM_VerifyCoupled(benchmark::State& state) {
  const auto mode = state.range(0);
  const auto k = static_cast<std::size_t>(state.range(1));
  const auto v = static_cast<std::size_t>(state.range(2));
  specdec::sampling_params sp = case_params(mode);
  sp.seed = 5;
  rows r = make_rows(k + 1, v, 7 * k + v);
  const std::size_t position = 100;  // the sequence index of row 0's token
  specdec::coupled_workspace cws;
  for (std::size_t i = 0; i < k; ++i)  // drafts: the coupled draws themselves, all kept
    r.drafts[i] = specdec::coupled_sample(r.row(i), sp, specdec::coupled_key(sp.seed, position + i),
                                          cws);
  // q = p itself: every draft kept (u < p / q = 1), whatever the filters leave of the row.
  specdec::row_matrix q(static_cast<Eigen::Index>(k), static_cast<Eigen::Index>(v));
  for (std::size_t i = 0; i < k; ++i)
    specdec::warp(r.row(i), sp, std::span<float>(q.row(static_cast<Eigen::Index>(i)).data(), v));
  const specdec::logits_view qv(q.data(), q.rows(), q.cols());
  specdec::rejection_workspace rws;
  specdec::rng gen(1);
  if (specdec::verify_coupled(r.view(), r.drafts, sp, position, cws).accepted != k ||
      specdec::verify_rejection(r.view(), r.drafts, qv, sp, gen, rws).accepted != k) {
    state.SkipWithError("a draft was not kept");
    return;
  }
  sb::paired_timer<sb::thread_cpu_clock> timer;
  std::size_t accepted = 0, calls = 0;
  for (auto _ : state) {
    timer.reference([&] {
      benchmark::DoNotOptimize(specdec::verify_rejection(r.view(), r.drafts, qv, sp, gen, rws));
    });
    specdec::verify_result res;
    const double s = timer.subject([&] {
      res = specdec::verify_coupled(r.view(), r.drafts, sp, position, cws);
      benchmark::DoNotOptimize(res);
    });
    accepted += res.accepted;
    ++calls;
    state.SetIterationTime(s);
  }
  timer.report(state);
  state.counters["accepted"] = static_cast<double>(accepted) / static_cast<double>(calls);
}

void coupled_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"case", "K", "V"});
  for (int c : {0, 2, 4})
    for (int k : {4, 8})
      for (int v : {32000, 128256}) b->Args({c, k, v});
}

void greedy_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"K", "V"});
  for (int k : {4, 8})
    for (int v : {32000, 128256, 151936}) b->Args({k, v});
}

void rejection_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"case", "K", "V"});
  for (int c = 0; c < 6; ++c)
    for (int k : {4, 8})
      for (int v : {32000, 128256, 151936}) b->Args({c, k, v});
}

void block_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"case", "K", "V"});
  for (int c : {0, 2, 4})
    for (int k : {4, 8})
      for (int v : {32000, 128256, 151936}) b->Args({c, k, v});
}

}  // namespace

BENCHMARK(BM_VerifyGreedy)->Apply(greedy_args)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_VerifyRejection)
    ->Apply(rejection_args)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

BENCHMARK(BM_VerifyBlock)->Apply(block_args)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_VerifyCoupled)->Apply(coupled_args)->UseManualTime()->Unit(benchmark::kMicrosecond);

BENCHMARK_MAIN();
