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
//   BM_BatchOverhead/temp/K/batch   batch_decoder::run() of `batch` sequences of 128 tokens each,
//                               on a batch model that memcpy's the same table's rows for every
//                               entry, the same drafter per sequence. Counters per
//                               sequence-step (one sequence's draft, verify and commit in a step):
//   total_us, model_us (the score calls), verify_us (the verifiers: batch_stats), and
//   overhead_us = total_us - model_us - verify_us: the library's own work per sequence-step, with
//              the (trivial) drafter's time counted in it: building the batch, the phases' checks
//              and bookkeeping, commits, statistics, clock reads.
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

#include <specdec/batch_decoder.hpp>
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

// A BatchLanguageModel whose every sequence is a table_lm: one memcpy per row.
class batch_table_lm {
 public:
  explicit batch_table_lm(const logit_table& t) : t_(t) {}
  std::size_t vocab_size() const noexcept { return vocab; }
  specdec::sequence_id create_sequence() {
    sizes_.push_back(0);
    return sizes_.size() - 1;
  }
  void release_sequence(specdec::sequence_id) {}
  std::size_t size(specdec::sequence_id id) const { return sizes_.at(id); }
  void truncate(specdec::sequence_id id, std::size_t n) { sizes_.at(id) = n; }
  void score(std::span<const specdec::batch_entry> batch) {
    for (const auto& e : batch) {
      std::size_t& size = sizes_.at(e.sequence);
      for (std::size_t i = 0; i < e.tokens.size(); ++i)
        std::memcpy(e.logits.data() + i * vocab, t_.row(size + i + 1).data(), vocab * sizeof(float));
      size += e.tokens.size();
    }
  }

 private:
  const logit_table& t_;
  std::vector<std::size_t> sizes_;
};

void BM_BatchOverhead(benchmark::State& state) {
  const bool greedy = state.range(0) == 0;
  const auto k = static_cast<std::size_t>(state.range(1));
  const auto batch_size = static_cast<std::size_t>(state.range(2));
  const logit_table table = make_table(!greedy);
  specdec::generate_options options;
  options.max_new_tokens = 128;
  options.draft_length = k;
  options.sampling.temperature = greedy ? 0.0f : 1.0f;
  const std::vector<token_id> prompt{table.next[0]};
  std::vector<table_drafter> drafters(batch_size, table_drafter(table));

  double total_s = 0.0, model_s = 0.0, verify_s = 0.0;
  std::size_t sequence_steps = 0;
  for (auto _ : state) {
    state.PauseTiming();
    batch_table_lm model(table);
    specdec::batch_decoder<batch_table_lm, table_drafter> batch(model);
    for (auto& d : drafters) batch.add(prompt, options, d);
    state.ResumeTiming();
    total_s += sb::time_call<sb::wall_clock>([&] { batch.run(); });
    const auto& s = batch.stats();
    if (s.generated_tokens != batch_size * options.max_new_tokens) {
      state.SkipWithError("a sequence stopped early or a draft was rejected");
      return;
    }
    model_s += s.target_seconds;
    verify_s += s.verify_seconds;
    sequence_steps += s.sequence_steps;
  }
  const auto per_step = [&](double s) { return 1e6 * s / static_cast<double>(sequence_steps); };
  state.counters["total_us"] = per_step(total_s);
  state.counters["model_us"] = per_step(model_s);
  state.counters["verify_us"] = per_step(verify_s);
  state.counters["overhead_us"] = per_step(total_s - model_s - verify_s);
}

}  // namespace

BENCHMARK(BM_BatchOverhead)
    ->ArgNames({"temp", "K", "batch"})
    ->Args({0, 4, 8})
    ->Args({0, 8, 8})
    ->Args({1, 4, 8})
    ->Args({0, 4, 64})
    ->Args({1, 8, 64})
    ->Unit(benchmark::kMillisecond);

BENCHMARK(BM_DecoderOverhead)
    ->ArgNames({"temp", "K"})
    ->Args({0, 4})
    ->Args({0, 8})
    ->Args({1, 4})
    ->Args({1, 8})
    ->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
