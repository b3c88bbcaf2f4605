// bench/decoder_bench.cpp - what speculative_decoder costs per generated token beyond the model
// and the verifier.
//
//   BM_DecoderOverhead/temp/K   generate() of 512 tokens, V = 32000, with a model that memcpy's
//                               precomputed rows of logits and a drafter that proposes the tokens
//                               the target accepts (deterministic: every step keeps K + 1).
//                               temp 0: greedy; temp 1: temperature 1, one-hot drafts (rows whose
//                               top token holds all the mass up to rounding, so p(x) = 1 and each
//                               draw accepts; the passes cost the same whatever the values).
//
// Counters, all per generated token, all wall time (steady_clock) of the same generate() calls:
//   total_us   the whole generate() call, timed around it
//   model_us   the model's append calls: decode_stats::target_seconds of those very calls
//   verify_us  the verifier calls: decode_stats::verify_seconds of those very calls
//   overhead_us = total_us - model_us - verify_us: drafting, feeding, committing, statistics
//              (including the decoder's own clock reads), setup of the run.
// The reported time is the benchmark's default, CPU time of the thread per generate() call.
//
//   cmake --preset bench && cmake --build --preset bench --target decoder_bench
//   build/bench/bench/decoder_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true --benchmark_min_time=0.2
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <random>
#include <span>
#include <stdexcept>
#include <vector>

#include <specdec/decoder.hpp>

#include "bench/support/timing.hpp"

namespace {

namespace sb = specdec::bench;
using specdec::token_id;
constexpr std::size_t vocab = 32000;
constexpr std::size_t table_rows = 64;
constexpr std::size_t new_tokens = 512;

// Row r of the table: the logits after a context of r (mod table_rows) tokens. `next[r]` is its
// argmax, the token the drafter proposes at that position.
struct logit_table {
  std::vector<float> rows;
  std::vector<token_id> next;
  std::span<const float> row(std::size_t context) const {
    return {rows.data() + (context % table_rows) * vocab, vocab};
  }
};

logit_table make_table(bool dominant) {
  logit_table t;
  t.rows.resize(table_rows * vocab);
  std::mt19937_64 g(42);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::uniform_int_distribution<std::size_t> pick(0, vocab - 1);
  for (std::size_t r = 0; r < table_rows; ++r) {
    float* row = t.rows.data() + r * vocab;
    float mx = -1e30f;
    for (std::size_t i = 0; i < vocab; ++i) mx = std::max(mx, row[i] = normal(g));
    const std::size_t top = pick(g);
    // Greedy: a clear winner. Temperature 1: every other token at least 60 below (exp() stays a
    // normal float, no denormal slowdown), so the total rounds to 1 and p(top) == 1.
    row[top] = mx + (dominant ? 60.0f : 4.0f);
    t.next.push_back(static_cast<token_id>(top));
  }
  return t;
}

// A LanguageModel whose logits after a context of length L are table row L.
class table_lm {
 public:
  explicit table_lm(const logit_table& t) : t_(t) {}
  std::size_t vocab_size() const noexcept { return vocab; }
  std::size_t size() const noexcept { return size_; }
  void append(std::span<const token_id> tokens, std::span<float> logits) {
    if (logits.size() != tokens.size() * vocab) throw std::invalid_argument("table_lm: size");
    for (std::size_t i = 0; i < tokens.size(); ++i)
      std::memcpy(logits.data() + i * vocab, t_.row(size_ + i + 1).data(), vocab * sizeof(float));
    size_ += tokens.size();
  }
  void truncate(std::size_t n) { size_ = n; }

 private:
  const logit_table& t_;
  std::size_t size_ = 0;
};

// Proposes the table's argmax for each next position: the target accepts all of it.
class table_drafter {
 public:
  explicit table_drafter(const logit_table& t) : t_(t) {}
  void propose(std::span<const token_id> history, std::size_t k, const specdec::sampling_params&,
               specdec::rng&, specdec::draft& out) {
    out.tokens.clear();
    for (std::size_t j = 0; j < k; ++j)
      out.tokens.push_back(t_.next[(history.size() + j) % table_rows]);
  }
  void accept(std::span<const token_id>) {}
  void reset() {}

 private:
  const logit_table& t_;
};

void BM_DecoderOverhead(benchmark::State& state) {
  const bool greedy = state.range(0) == 0;
  const auto k = static_cast<std::size_t>(state.range(1));
  const logit_table table = make_table(!greedy);
  table_lm model(table);
  table_drafter drafter(table);
  specdec::speculative_decoder<table_lm, table_drafter> decoder(model, drafter);
  specdec::generate_options options;
  options.max_new_tokens = new_tokens;
  options.draft_length = k;
  options.sampling.temperature = greedy ? 0.0f : 1.0f;
  const std::vector<token_id> prompt{table.next[0]};

  double total_s = 0.0, model_s = 0.0, verify_s = 0.0;
  std::size_t tokens = 0;
  for (auto _ : state) {
    specdec::generate_result result;
    total_s += sb::time_call<sb::wall_clock>([&] { result = decoder.generate(prompt, options); });
    benchmark::DoNotOptimize(result.tokens.data());
    if (result.tokens.size() != new_tokens ||
        result.stats.accepted_tokens != result.stats.drafted_tokens) {
      state.SkipWithError("a draft was rejected: the table is not deterministic");
      return;
    }
    model_s += result.stats.target_seconds;
    verify_s += result.stats.verify_seconds;
    tokens += result.tokens.size();
  }
  const auto per_token = [&](double s) { return 1e6 * s / static_cast<double>(tokens); };
  state.counters["total_us"] = per_token(total_s);
  state.counters["model_us"] = per_token(model_s);
  state.counters["verify_us"] = per_token(verify_s);
  state.counters["overhead_us"] = per_token(total_s - model_s - verify_s);
}

}  // namespace

BENCHMARK(BM_DecoderOverhead)
    ->ArgNames({"temp", "K"})
    ->Args({0, 4})
    ->Args({0, 8})
    ->Args({1, 4})
    ->Args({1, 8})
    ->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
