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
// Counters, all per generated token and CPU time of the benchmark thread:
//   total_us   generate() (the reported time is the same, per call)
//   model_us   the model's append/truncate calls alone
//   verify_us  the verifier calls alone
//   overhead_us = total_us - model_us - verify_us: drafting, feeding, committing, statistics.
// model_us and verify_us come from a replay of the same calls, in the same order, on the same
// rows (append, then verify what it wrote), timed call by call; it runs right after each
// generate(), so both see the same state of the shared machine.
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <span>
#include <stdexcept>
#include <vector>

#include <time.h>

#include <specdec/decoder.hpp>

namespace {

using specdec::token_id;
constexpr std::size_t vocab = 32000;
constexpr std::size_t table_rows = 64;
constexpr std::size_t new_tokens = 512;

double thread_cpu_s() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

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

  // The replay: the same model calls and verifier calls generate() makes, in the same order (every
  // step keeps k + 1 tokens; the last step is shortened by max_new_tokens), each timed on its own.
  std::vector<float> logits;
  std::vector<token_id> feed;
  specdec::rejection_workspace ws;
  specdec::rng gen;
  table_lm replay_model(table);
  double model_s = 0.0, verify_s = 0.0;
  auto replay = [&] {
    std::size_t h = 1;
    replay_model.truncate(0);
    while (h - 1 < new_tokens) {
      const std::size_t n = std::min(k, new_tokens - (h - 1) - 1);
      feed.assign(1, prompt[0]);
      for (std::size_t j = 0; j < n; ++j) feed.push_back(table.next[(h + j) % table_rows]);
      logits.resize((n + 1) * vocab);
      const double t0 = thread_cpu_s();
      replay_model.append(feed, logits);
      replay_model.truncate(h + n);
      const double t1 = thread_cpu_s();
      const specdec::logits_view rows(logits.data(), static_cast<Eigen::Index>(n + 1),
                                      static_cast<Eigen::Index>(vocab));
      const std::span<const token_id> drafts(feed.data() + 1, n);
      const specdec::logits_view no_q(nullptr, 0, static_cast<Eigen::Index>(vocab));
      const auto res = greedy ? specdec::verify_greedy(rows, drafts)
                              : specdec::verify_rejection(rows, drafts, no_q, options.sampling,
                                                          gen, ws);
      benchmark::DoNotOptimize(res);
      const double t2 = thread_cpu_s();
      if (res.accepted != n) throw std::logic_error("replay: a draft was rejected");
      model_s += t1 - t0;
      verify_s += t2 - t1;
      h += n + 1;
    }
  };

  double total_s = 0.0;
  std::size_t tokens = 0;
  for (auto _ : state) {
    const double t0 = thread_cpu_s();
    const auto result = decoder.generate(prompt, options);
    const double t1 = thread_cpu_s();
    benchmark::DoNotOptimize(result.tokens.data());
    if (result.tokens.size() != new_tokens ||
        result.stats.accepted_tokens != result.stats.drafted_tokens) {
      state.SkipWithError("a draft was rejected: the table is not deterministic");
      return;
    }
    state.PauseTiming();
    replay();
    state.ResumeTiming();
    total_s += t1 - t0;
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
