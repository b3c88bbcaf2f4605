// bench/speedup_bench.cpp - the wall-clock speed-up of speculative decoding on a memory-bound
// target, measured and predicted, per drafter.
//
// Target: aidreams260K reshaped to the 110M shape (or SPECDEC_BENCH_SHAPE): the real model's
// predictions, so acceptance is real, at a 110M-shape model's forward cost on this engine, so
// times are real (bench/support/reshaped.hpp). Rows:
//   - a separate draft model, the first L = 1, 2, 3 layers of aidreams260K (specdec-reshape
//     --keep-layers L), chains of K = 2..8, and token trees drafted by the 3-layer draft;
//   - layer-skip of the reshaped target itself (its first 3 or 6 of 12 layers), K = 4;
//   - n-gram prompt lookup (K = 4, 8) on the prompts that quote text the model continues;
//   - composed drafting ("cmp" rows): prompt lookup first, the 3-layer draft model when the
//     lookup proposes nothing, K = 4, beside each alone, on the free and the quoting prompts;
// greedy and temperature 0.8. The model rows decode the four free prompts of
// bench/support/e2e.hpp, the n-gram rows the four quoting ones; 64 new tokens each.
//
// Columns: tok/call (generated tokens per target call); speedup (median over repetitions of
// tokens/s divided by plain decoding's in the same repetition; every configuration runs once per
// repetition, in order); predicted (the speed-up the run's own counts imply: plain's tokens x
// t(1) over the sum, over steps, of t(n) for that step's n = drafted tokens + 1, plus the draft
// model's calls x its t(1); t(n) and the drafts' t(1) are measured by a calibration in the same
// process); ratio = speedup / predicted, flagged `<0.9` when below 0.9; draft% / target% of the
// decoding time and tgt/pred, the target calls' measured time over the calibration's prediction
// for them (where the time went; plain decoding's tgt/pred says how the calibration's t(1)
// compares with plain decoding's own calls).
//
//   cmake --preset bench && cmake --build --preset bench --target speedup_bench
//   build/bench/bench/speedup_bench [repetitions = 3] [filter]
//   (filter: run only rows whose name contains it, e.g. "first3" or "ngram"; plain always runs)
//
// Skips (exit 0) without the checkpoint and tokenizer.
#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <span>
#include <specdec/specdec.hpp>
#include <string>
#include <vector>

#include "bench/support/calibrate.hpp"
#include "bench/support/e2e.hpp"
#include "bench/support/models.hpp"
#include "bench/support/reshaped.hpp"
#include "bench/support/timing.hpp"
#include "llama2c/engine/model.hpp"
#include "llama2c/engine/tokenizer.hpp"

namespace {

namespace l2 = specdec::llama2c;
namespace sb = specdec::bench;
using specdec::token_id;

constexpr std::size_t new_tokens = 64;
constexpr std::size_t max_calibrated = 33;  // t(n) for n = 1..33 (chains to K = 8, trees <= 32)

struct row {
  std::string name;
  std::function<sb::totals(float temperature)> run;
  double draft_t1 = 0.0;  // the draft model's t(1), 0 for n-gram lookup
  bool tree = false;      // drafts token trees (its steps cost t(nodes + 1))
  bool quoting = false;   // decodes the quoting prompts (compared with plain decoding of those)
};

// Interpolated t(x) for a fractional token count (trees: mean nodes per step + 1).
double t_at(const std::vector<double>& t, double x) {
  x = std::clamp(x, 1.0, static_cast<double>(t.size() - 1));
  const auto lo = static_cast<std::size_t>(x);
  const double f = x - static_cast<double>(lo);
  return lo + 1 < t.size() ? t[lo] * (1 - f) + t[lo + 1] * f : t[lo];
}

// Seconds of target calls the run's own counts predict: every step costs t(its drafted tokens
// + 1).
double predicted_target_seconds(const sb::totals& s, const std::vector<double>& t, bool tree) {
  double target = 0.0;
  if (tree) {
    target = static_cast<double>(s.calls) * t_at(t, s.nodes_per_call() + 1.0);
  } else {
    // drafted_at[i] = steps with a draft token at position i: steps with exactly i tokens are
    // drafted_at[i - 1] - drafted_at[i] (all calls for i = 0).
    for (std::size_t len = 0; len <= s.drafted_at.size(); ++len) {
      const std::size_t at_least = len == 0 ? s.calls : s.drafted_at[len - 1];
      const std::size_t more = len < s.drafted_at.size() ? s.drafted_at[len] : 0;
      target += static_cast<double>(at_least - more) * t_at(t, static_cast<double>(len + 1));
    }
  }
  return target;
}

// Seconds the run's own counts predict: the target's calls, and every draft model call at the
// draft's t(1).
double predicted_seconds(const sb::totals& s, const std::vector<double>& t, double draft_t1,
                         bool tree) {
  return predicted_target_seconds(s, t, tree) + static_cast<double>(s.draft_model_calls) * draft_t1;
}

}  // namespace

int main(int argc, char** argv) {
  if (sb::skip_without("speedup_bench", {sb::checkpoint_path, sb::tokenizer_path})) return 0;
  const int reps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 3;
  const std::string filter = argc > 2 ? argv[2] : "";
  const char* shape_env = std::getenv("SPECDEC_BENCH_SHAPE");
  const std::string shape = shape_env != nullptr ? shape_env : "110M";

  auto pool = std::make_shared<l2::thread_pool>();
  const auto weights = l2::load_checkpoint(sb::reshaped(shape));
  l2::model target(weights, {.pool = pool});
  const l2::tokenizer tok(sb::tokenizer_path, target.vocab_size());
  const auto encoded = sb::encode_prompts(tok, false);
  const std::vector<std::vector<token_id>> free_prompts(encoded.begin(), encoded.begin() + 4);
  const std::vector<std::vector<token_id>> quoting(encoded.begin() + 4, encoded.end());
  std::printf(
      "target: aidreams260K reshaped to %s (%.0f MB of weights, loaded in %.3f s), "
      "%zu threads; %zu new tokens per prompt, %d repetitions\n",
      shape.c_str(), static_cast<double>(weights->bytes()) / 1e6, weights->load_seconds(),
      pool->size(), new_tokens, reps);

  // The drafts: separate models (the first L layers of aidreams260K) and layer-skip views.
  std::vector<std::unique_ptr<l2::model>> firsts;
  for (std::size_t l = 1; l <= 3; ++l)
    firsts.push_back(std::make_unique<l2::model>(
        l2::load_checkpoint(sb::first_layers(l)),
        l2::model_options{.max_context = target.max_size(), .pool = pool}));
  l2::layer_skip_draft skip3(target, 3), skip6(target, 6);

  // Calibration: t(n) of the target and t(1) of every draft, in this process.
  const std::vector<double> t = sb::cost_curve(target, max_calibrated);
  std::printf("t(n)/t(1), t(1) = %.2f ms:", 1e3 * t[1]);
  for (std::size_t n = 2; n <= max_calibrated; n += n < 10 ? 1 : 8)
    std::printf(" %zu:%.2f", n, t[n] / t[1]);
  std::printf("\n");
  double first_t1[3];
  for (std::size_t l = 0; l < 3; ++l) first_t1[l] = sb::time_append(*firsts[l], 1);
  const double skip3_t1 = sb::time_append(skip3, 1), skip6_t1 = sb::time_append(skip6, 1);
  std::printf(
      "draft t(1): first1 %.3f ms, first2 %.3f ms, first3 %.3f ms, skip3 %.2f ms, "
      "skip6 %.2f ms\n\n",
      1e3 * first_t1[0], 1e3 * first_t1[1], 1e3 * first_t1[2], 1e3 * skip3_t1, 1e3 * skip6_t1);

  specdec::no_drafter none;
  std::vector<std::unique_ptr<specdec::model_drafter<l2::model>>> first_drafters;
  for (auto& m : firsts)
    first_drafters.push_back(std::make_unique<specdec::model_drafter<l2::model>>(*m));
  specdec::model_drafter<l2::layer_skip_draft> skip3_drafter(skip3), skip6_drafter(skip6);
  specdec::ngram_drafter lookup({.min_ngram = 2, .max_ngram = 4, .max_draft = 8});
  const auto cd = specdec::candidate_draw::iid;

  std::vector<row> rows;
  const auto add = [&](std::string name, std::function<sb::totals(float)> run, double t1, bool tree,
                       bool quote) {
    rows.push_back({std::move(name), std::move(run), t1, tree, quote});
  };
  add(
      "plain",
      [&](float temp) {
        return sb::decode_all(target, none, 0, {}, cd, temp, free_prompts, new_tokens);
      },
      0.0, false, false);
  add(
      "plain (quoting prompts)",
      [&](float temp) {
        return sb::decode_all(target, none, 0, {}, cd, temp, quoting, new_tokens);
      },
      0.0, false, true);
  for (std::size_t l = 0; l < 3; ++l)
    for (std::size_t k = 2; k <= 8; ++k)
      add(
          "first" + std::to_string(l + 1) + " K=" + std::to_string(k),
          [&, l, k](float temp) {
            return sb::decode_all(target, *first_drafters[l], k, {}, cd, temp, free_prompts,
                                  new_tokens);
          },
          first_t1[l], false, false);
  for (const char* shape_text : {"2x2x1", "2x2x2", "3x1x1x1"}) {
    const auto tree = specdec::parse_branching(shape_text);
    add(
        std::string("first3 tree ") + shape_text,
        [&, tree](float temp) {
          return sb::decode_all(target, *first_drafters[2], 0, tree, cd, temp, free_prompts,
                                new_tokens);
        },
        first_t1[2], true, false);
  }
  add(
      "skip3of12 K=4",
      [&](float temp) {
        return sb::decode_all(target, skip3_drafter, 4, {}, cd, temp, free_prompts, new_tokens);
      },
      skip3_t1, false, false);
  add(
      "skip6of12 K=4",
      [&](float temp) {
        return sb::decode_all(target, skip6_drafter, 4, {}, cd, temp, free_prompts, new_tokens);
      },
      skip6_t1, false, false);
  for (std::size_t k : {4, 8})
    add(
        "ngram K=" + std::to_string(k),
        [&, k](float temp) {
          return sb::decode_all(target, lookup, k, {}, cd, temp, quoting, new_tokens);
        },
        0.0, false, true);
  // Composed drafting (filter "cmp"): prompt lookup first, the 3-layer draft model when the
  // lookup proposes nothing, K = 4, against each alone, on both prompt sets.
  specdec::ngram_drafter cmp_lookup({.min_ngram = 2, .max_ngram = 4, .max_draft = 8});
  specdec::composed_drafter composed(cmp_lookup, *first_drafters[2]);
  for (const bool quote : {false, true}) {
    const auto& set = quote ? quoting : free_prompts;
    const std::string tag = quote ? " (quoting)" : " (free)";
    add(
        "cmp first3 K=4" + tag,
        [&](float temp) {
          return sb::decode_all(target, *first_drafters[2], 4, {}, cd, temp, set, new_tokens);
        },
        first_t1[2], false, quote);
    add(
        "cmp ngram K=4" + tag,
        [&](float temp) { return sb::decode_all(target, cmp_lookup, 4, {}, cd, temp, set, new_tokens); },
        0.0, false, quote);
    add(
        "cmp ngram+first3 K=4" + tag,
        [&](float temp) { return sb::decode_all(target, composed, 4, {}, cd, temp, set, new_tokens); },
        first_t1[2], false, quote);
  }

  const auto skip = [&](std::size_t i) {
    return i > 1 && !filter.empty() && rows[i].name.find(filter) == std::string::npos;
  };
  for (const float temp : {0.0f, 0.8f}) {
    const auto runs = sb::run_interleaved(rows, temp, reps, skip);
    std::printf("temperature %.1f\n%-24s %8s %8s %9s %6s %6s %7s %7s %8s\n", temp, "drafter",
                "tok/call", "speedup", "predicted", "ratio", "", "draft%", "target%", "tgt/pred");
    for (std::size_t i = 0; i < rows.size(); ++i) {
      if (runs.speedup[i].empty()) continue;
      const sb::totals& s = runs.last[i];
      // Speed-ups are against plain decoding of the same prompts.
      const std::size_t ref = rows[i].quoting ? 1 : 0;
      std::vector<double> ratios;
      for (std::size_t r = 0; r < runs.tokens_per_second[i].size(); ++r)
        ratios.push_back(runs.tokens_per_second[i][r] / runs.tokens_per_second[ref][r]);
      const double speedup = sb::median(ratios);
      // Plain decoding costs t(1) per token; the row, its predicted seconds per token.
      const double pred = i <= 1 ? 1.0
                                 : t[1] * static_cast<double>(s.generated) /
                                       predicted_seconds(s, t, rows[i].draft_t1, rows[i].tree);
      // Where the time went: the target calls' measured seconds over the calibration's.
      const double target_ratio = s.target / predicted_target_seconds(s, t, rows[i].tree);
      std::printf("%-24s %8.2f %7.2fx %8.2fx %6.2f %6s %6.1f%% %6.1f%% %8.2f\n",
                  rows[i].name.c_str(), s.tokens_per_call(), speedup, pred, speedup / pred,
                  speedup / pred < 0.9 ? "<0.9" : "", s.percent(s.draft), s.percent(s.target),
                  target_ratio);
    }
    std::printf("\n");
  }
  return 0;
}
