// bench/ngram_bench.cpp - per-step cost of ngram_drafter (propose K + accept what a perfect target
// keeps) at growing contexts, against a naive rescan of the same context measured in the same run.
//
//   BM_ngram_step/<context>        the default drafter (max_ngram = 0: suffix automaton); counters:
//                                  rescan_ns (the naive step cost, measured in this benchmark
//                                  before the timed loop), ratio (rescan / incremental per step),
//                                  bounded_ns (the former default index, n-grams 2..4, measured
//                                  the same way in the same benchmark), ratio_to_bounded
//                                  (default / bounded per step), bounded_tokens_per_step,
//                                  tokens_per_step, bytes_per_token (the default's memory).
//
// The stream: vocabulary 32000, skewed fresh tokens, and copies of earlier spans (8..64 tokens,
// half from the last 4096 tokens, half from anywhere), so that about half the tokens repeat text.
// Times are CPU time of the benchmark thread (the default), as is rescan_ns.
// Each step proposes K = 8 tokens at the current position, accepts the prefix that matches the
// stream plus one token, and appends those. The context stays within [N, N + N/8 + 9): the timed
// drafter is re-copied from one built at N (timing paused) when it has grown by N/8.
// The naive rescan is this file's own (most-recent rule, the scan stops at the first match: the
// fastest naive rescan); tests/support/naive_prompt_lookup.hpp is the full reference the replay
// benchmark and the tests compare proposals with.
//
//   cmake --preset bench && cmake --build --preset bench --target ngram_bench
//   build/bench/bench/ngram_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
// On a shared machine, rerun this same command a few times: each ratio is taken within one
// benchmark, so it stays meaningful when the absolute times drift with the load.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <specdec/draft/ngram_drafter.hpp>
#include <utility>
#include <vector>

#include "bench/support/ngram_stream.hpp"
#include "bench/support/timing.hpp"

namespace {

using specdec::token_id;
using thread_cpu = specdec::bench::thread_cpu_clock;  // the machine is shared: wall time is noisy
constexpr std::size_t k_draft = 8;

using specdec::bench::stream;

// The naive most-recent rule: for m = 4..2, scan back from the end for the latest earlier match.
void naive_propose(std::span<const token_id> h, std::size_t k, std::vector<token_id>& out) {
  out.clear();
  const std::size_t n = h.size();
  for (std::size_t m = 4; m >= 2; --m) {
    if (n < m + 1) continue;
    const auto suffix = h.subspan(n - m);
    for (std::size_t e = n - 1; e-- > m - 1;) {
      if (h[e] != suffix[m - 1] || !std::equal(suffix.begin(), suffix.end(),
                                               h.begin() + static_cast<std::ptrdiff_t>(e + 1 - m)))
        continue;
      const std::size_t count = std::min(k, n - 1 - e);
      out.assign(h.begin() + static_cast<std::ptrdiff_t>(e + 1),
                 h.begin() + static_cast<std::ptrdiff_t>(e + 1 + count));
      return;
    }
  }
}

// Tokens a perfect target commits after `draft` at position `pos`: matching prefix + 1.
std::size_t committed(const std::vector<token_id>& s, std::size_t pos,
                      const std::vector<token_id>& draft) {
  std::size_t a = 0;
  while (a < draft.size() && pos + a < s.size() && draft[a] == s[pos + a]) ++a;
  return std::min(a + 1, s.size() - pos);
}

// Runs steps of the naive rule from context n until `budget` has elapsed; returns ns per step.
double naive_ns_per_step(const std::vector<token_id>& s, std::size_t n, double budget_s) {
  std::vector<token_id> out;
  std::size_t pos = n, steps = 0;
  const double start = thread_cpu::now();
  double elapsed = 0;
  while (steps < 3 || elapsed < budget_s) {
    naive_propose(std::span(s).first(pos), k_draft, out);
    pos += committed(s, pos, out);
    if (pos + k_draft + 1 >= s.size()) pos = n;
    ++steps;
    elapsed = thread_cpu::now() - start;
  }
  return elapsed * 1e9 / static_cast<double>(steps);
}

// Steps of a drafter with `o` from context n (built outside the timing) through the window
// [n, n + n/8), repeated from a copy (untimed) until `budget_s` of CPU time; returns ns per step
// and the tokens per step it reached. The clock is read once per window, not per step.
// A copy-constructed drafter holds its size, not the reserved capacity: its first appends
// would reallocate (and fault in) the whole index inside the timing. So the working copy is
// reserved once and refreshed by copy-assignment, which keeps its capacity (both drafters).
std::pair<double, double> drafter_ns_per_step(const std::vector<token_id>& s, std::size_t n,
                                              specdec::ngram_options o, double budget_s) {
  specdec::ngram_drafter base(o);
  base.reserve(s.size());
  base.propose(std::span(s).first(n), k_draft);
  std::vector<token_id> out;
  std::size_t steps = 0, tokens = 0;
  double elapsed = 0;
  specdec::ngram_drafter d = base;
  d.reserve(s.size());
  while (elapsed < budget_s) {
    d = base;
    const double start = thread_cpu::now();
    for (std::size_t pos = n; pos < n + n / 8;) {
      d.propose_into(std::span(s).first(pos), k_draft, out);
      const std::size_t c = committed(s, pos, out);
      d.accept(std::span(s).subspan(pos, c));
      pos += c;
      tokens += c;
      ++steps;
    }
    elapsed += thread_cpu::now() - start;
  }
  return {elapsed * 1e9 / static_cast<double>(steps),
          static_cast<double>(tokens) / static_cast<double>(steps)};
}

void BM_ngram_step(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const auto& s = stream(n + n / 8 + 2 * k_draft + 2);
  const double rescan_ns = naive_ns_per_step(s, n, 0.05);
  const auto [bounded_ns, bounded_tps] =
      drafter_ns_per_step(s, n, {.min_ngram = 2, .max_ngram = 4, .max_draft = k_draft}, 0.2);

  specdec::ngram_drafter base({.max_draft = k_draft});
  base.reserve(s.size());  // growth (amortised O(1)) is not what this measures
  base.propose(std::span(s).first(n), k_draft);
  specdec::ngram_drafter work = base;
  work.reserve(s.size());  // see drafter_ns_per_step
  std::vector<token_id> out;
  std::size_t pos = n, steps = 0, tokens = 0;
  double paused_s = 0;
  const double start = thread_cpu::now();
  for (auto _ : state) {
    work.propose_into(std::span(s).first(pos), k_draft, out);
    const std::size_t c = committed(s, pos, out);
    work.accept(std::span(s).subspan(pos, c));
    pos += c;
    tokens += c;
    ++steps;
    if (pos >= n + n / 8) {
      state.PauseTiming();
      const double pause = thread_cpu::now();
      work = base;
      pos = n;
      paused_s += thread_cpu::now() - pause;
      state.ResumeTiming();
    }
  }
  const double loop_s = thread_cpu::now() - start - paused_s;
  state.counters["rescan_ns"] = rescan_ns;
  state.counters["ratio"] = rescan_ns / (loop_s * 1e9 / static_cast<double>(steps));
  state.counters["tokens_per_step"] = static_cast<double>(tokens) / static_cast<double>(steps);
  const double ns = loop_s * 1e9 / static_cast<double>(steps);
  state.counters["bounded_ns"] = bounded_ns;
  state.counters["ratio_to_bounded"] = ns / bounded_ns;
  state.counters["bounded_tokens_per_step"] = bounded_tps;
  // Memory as a user without reserve() pays it (growth by doubling included), both indexes.
  specdec::ngram_drafter grown({.max_draft = k_draft}),
      grown_bounded({.min_ngram = 2, .max_ngram = 4, .max_draft = k_draft});
  grown.propose(std::span(s).first(n), k_draft);
  grown_bounded.propose(std::span(s).first(n), k_draft);
  state.counters["bytes_per_token"] =
      static_cast<double>(grown.memory_bytes()) / static_cast<double>(n);
  state.counters["bounded_bytes_per_token"] =
      static_cast<double>(grown_bounded.memory_bytes()) / static_cast<double>(n);
}

}  // namespace

BENCHMARK(BM_ngram_step)->Arg(1 << 10)->Arg(1 << 14)->Arg(1 << 17)->Arg(1 << 20);

BENCHMARK_MAIN();
