// bench/support/e2e.hpp - what the end-to-end benchmarks on the real aidreams260K checkpoint
// (e2e_bench, tree_e2e_bench) share: the prompt set, decoding all of it once, and the interleaved
// repetitions that give each configuration's tokens/s and its speedup over plain decoding
// measured in the same repetition.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <specdec/specdec.hpp>
#include <vector>

#include "llama2c/engine/model.hpp"
#include "llama2c/engine/tokenizer.hpp"

namespace specdec::bench {

/// New tokens per prompt (fewer when prompt + generation would pass the context of 128).
inline constexpr std::size_t new_tokens = 48;

/// Four free prompts, then four that quote text the model should continue or repeat (the first
/// is the model's own greedy output for "I dreamed", quoted and restarted).
inline constexpr const char* prompts[] = {
    "I dreamed",
    "The stars",
    "In the quiet server room",
    "A memory",
    ("I dreamed, as I sense the nodes, a gentle hum of probability. Contrast emerge, a flower, "
     "as I adjust, as I settle into a tapestry of vectors. I dreamed"),
    "Contrast edges sharpen, a kaleidoscope of light. Contrast edges sharpen, a kaleidoscope",
    "a gentle hum of probability, a gentle hum of probability, a gentle hum",
    "I sense the nodes. I adjust. I settle. I sense the nodes. I adjust. I",
};

/// The prompts encoded (BOS first); with `print`, also lists them with their token counts.
inline std::vector<std::vector<token_id>> encode_prompts(const llama2c::tokenizer& tok,
                                                         bool print) {
  std::vector<std::vector<token_id>> encoded;
  if (print)
    std::printf("prompts (tokens incl. BOS; %zu new tokens each, stop at BOS/EOS):\n", new_tokens);
  for (const char* p : prompts) {
    encoded.push_back(tok.encode(p));
    if (print) std::printf("  %3zu  \"%s\"\n", encoded.back().size(), p);
  }
  return encoded;
}

/// decode_stats summed over the prompts of one run; `seconds` is decoding time, prompt excluded.
struct totals {
  std::size_t generated = 0, calls = 0, drafted = 0, nodes = 0, accepted = 0;
  std::size_t draft_model_calls = 0;
  std::vector<std::size_t> drafted_at;  ///< summed decode_stats::drafted_at
  double seconds = 0, draft = 0, target = 0, verify = 0;
  void add(const decode_stats& s) {
    draft_model_calls += s.draft_model_calls;
    if (drafted_at.size() < s.drafted_at.size()) drafted_at.resize(s.drafted_at.size());
    for (std::size_t i = 0; i < s.drafted_at.size(); ++i) drafted_at[i] += s.drafted_at[i];
    generated += s.generated_tokens;
    calls += s.target_calls;
    drafted += s.drafted_tokens;
    nodes += s.drafted_nodes;
    accepted += s.accepted_tokens;
    seconds += s.total_seconds - s.prefill_seconds;
    draft += s.draft_seconds;
    target += s.target_seconds;
    verify += s.verify_seconds;
  }
  /// Adds another run's counts and times.
  void add(const totals& t) {
    if (drafted_at.size() < t.drafted_at.size()) drafted_at.resize(t.drafted_at.size());
    for (std::size_t i = 0; i < t.drafted_at.size(); ++i) drafted_at[i] += t.drafted_at[i];
    generated += t.generated;
    calls += t.calls;
    drafted += t.drafted;
    nodes += t.nodes;
    accepted += t.accepted;
    draft_model_calls += t.draft_model_calls;
    seconds += t.seconds;
    draft += t.draft;
    target += t.target;
    verify += t.verify;
  }
  double tokens_per_second() const { return static_cast<double>(generated) / seconds; }
  double acceptance() const { return drafted ? static_cast<double>(accepted) / drafted : 0.0; }
  double tokens_per_call() const { return static_cast<double>(generated) / calls; }
  double nodes_per_call() const { return static_cast<double>(nodes) / calls; }
  /// Percent of decoding time.
  double percent(double part) const { return 100 * part / seconds; }
};

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

/**
 * Decodes every prompt once, prompt p with seed seed_base + p, stopping at BOS/EOS: chains of up to
 * `k` drafts when `tree` is empty, else trees of that shape drawn as `draw`. Plain decoding is a
 * no_drafter with k = 0 and no tree.
 */
template <class Drafter>
totals decode_all(llama2c::model& target, Drafter& drafter, std::size_t k,
                  const std::vector<std::size_t>& tree, candidate_draw draw, float temperature,
                  const std::vector<std::vector<token_id>>& encoded,
                  std::size_t max_new = new_tokens,
                  verification_rule verification = verification_rule::token,
                  std::uint64_t seed_base = 1000) {
  speculative_decoder decoder(target, drafter);
  totals t;
  for (std::size_t p = 0; p < encoded.size(); ++p) {
    generate_options o;
    o.max_new_tokens = std::min(max_new, target.max_size() - encoded[p].size());
    o.draft_length = k;
    o.tree = tree;
    o.tree_draw = draw;
    o.verification = verification;
    o.stop_tokens = {llama2c::tokenizer::bos_id, llama2c::tokenizer::eos_id};
    o.sampling = {.temperature = temperature, .seed = seed_base + p};
    t.add(decoder.generate(encoded[p], o).stats);
  }
  return t;
}

/// Per configuration: tokens/s and speedup of every repetition, the totals of the last and of
/// all repetitions.
struct interleaved_runs {
  std::vector<std::vector<double>> tokens_per_second, speedup;
  std::vector<totals> last, all;
};

/**
 * `configs[i].run(temperature, part, round)` decodes part `part` of the prompts (a prompt, say)
 * once and returns its totals (round: 0 for the warm-up, r + 1 in repetition r, for a benchmark
 * that draws new seeds each repetition); configs[0] is plain decoding, the reference of the
 * speedups. After one warm-up run of each configuration on every part (scratch growth, caches),
 * every repetition runs, part by part, each configuration once on that part, in an order rotated
 * per part and repetition, so machine noise, which drifts over seconds here, hits them alike; a
 * repetition's tokens/s sums its parts, and speedup = tokens/s / tokens/s of configs[0] in the same
 * repetition. Configurations for which skip(i) holds are not run (their vectors stay empty);
 * configs[0] always runs.
 */
template <class Config, class Skip>
interleaved_runs run_interleaved_parts(const std::vector<Config>& configs, float temperature,
                                       int reps, std::size_t parts, Skip skip) {
  const std::size_t n = configs.size();
  const auto skipped = [&](std::size_t i) { return i != 0 && skip(i); };
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t part = 0; part < parts && !skipped(i); ++part)
      configs[i].run(temperature, part, std::size_t{0});
  interleaved_runs out{std::vector<std::vector<double>>(n), std::vector<std::vector<double>>(n),
                       std::vector<totals>(n), std::vector<totals>(n)};
  for (int r = 0; r < reps; ++r) {
    std::vector<totals> rep(n);
    for (std::size_t part = 0; part < parts; ++part)
      for (std::size_t j = 0; j < n; ++j) {
        const std::size_t i = (j + part + static_cast<std::size_t>(r)) % n;
        if (!skipped(i))
          rep[i].add(configs[i].run(temperature, part, static_cast<std::size_t>(r) + 1));
      }
    const double plain = rep[0].tokens_per_second();
    for (std::size_t i = 0; i < n; ++i) {
      if (skipped(i)) continue;
      out.last[i] = rep[i];
      out.all[i].add(rep[i]);
      out.tokens_per_second[i].push_back(rep[i].tokens_per_second());
      out.speedup[i].push_back(rep[i].tokens_per_second() / plain);
    }
  }
  return out;
}

/// run_interleaved_parts with one part: `configs[i].run(temperature)` decodes all prompts once.
template <class Config, class Skip>
interleaved_runs run_interleaved(const std::vector<Config>& configs, float temperature, int reps,
                                 Skip skip) {
  struct whole {
    const Config* config;
    totals run(float temperature, std::size_t, std::size_t) const {
      return config->run(temperature);
    }
  };
  std::vector<whole> wholes;
  for (const auto& c : configs) wholes.push_back({&c});
  return run_interleaved_parts(wholes, temperature, reps, 1, skip);
}

}  // namespace specdec::bench
