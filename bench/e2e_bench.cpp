// bench/e2e_bench.cpp - end-to-end speculative decoding on the real aidreams260K checkpoint:
// plain decoding vs the layer-skip draft (L = 1, 2, 3) vs prompt lookup (n-gram: the former
// 2..4-gram defaults and today's, unbounded with min_ngram 1), at greedy and
// temperature 1, K in {2, 4, 8}, over 8 fixed prompts (4 free, 4 that quote text to continue).
//
// A plain program that prints markdown tables (not a Google Benchmark binary: one row needs a
// whole set of generations). Per repetition, every configuration decodes all prompts with the
// same per-prompt seeds, configurations interleaved so that machine noise hits them alike; the
// plain-decoding reference is measured in the same repetition and the speedup is the median over
// repetitions of (tokens/s of the config) / (tokens/s of plain decoding in that repetition).
//
//   cmake --preset bench && cmake --build --preset bench --target e2e_bench
//   build/bench/bench/e2e_bench [repetitions = 7]   (docs/benchmarks.md's table: 3 repetitions)
//
// Columns: tok/s (median), speedup (median of same-repetition ratios), accept (accepted / drafted
// positions), tok/call (generated tokens per target call), draft / target / verify (shares of
// decoding time, prompt excluded, from decode_stats). Skips (exit 0) without the checkpoint.
#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include <specdec/specdec.hpp>

#include "bench/support/e2e.hpp"
#include "bench/support/models.hpp"
#include "llama2c/engine/model.hpp"
#include "llama2c/engine/tokenizer.hpp"

namespace {

namespace l2 = specdec::llama2c;
namespace sb = specdec::bench;

struct config {
  std::string name;
  std::size_t k = 0;
  // Decodes every prompt once with the given sampling; returns the run's totals.
  std::function<sb::totals(float temperature)> run;
};

}  // namespace

int main(int argc, char** argv) {
  if (sb::skip_without("e2e_bench", {sb::checkpoint_path, sb::tokenizer_path})) return 0;
  const int reps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 7;

  auto weights = l2::load_checkpoint(sb::checkpoint_path);
  l2::model target(weights);
  const l2::tokenizer tok(sb::tokenizer_path, target.vocab_size());
  const auto encoded = sb::encode_prompts(tok, true);

  // A chain of up to k drafts from `drafter` over all prompts.
  const auto chains = [&](auto& drafter, std::size_t k) {
    return [&drafter, &target, &encoded, k](float t) {
      return sb::decode_all(target, drafter, k, {}, specdec::candidate_draw::iid, t, encoded);
    };
  };
  l2::layer_skip_draft d1(target, 1), d2(target, 2), d3(target, 3);
  specdec::model_drafter m1(d1), m2(d2), m3(d3);
  specdec::no_drafter none;
  // Prompt lookup with the former defaults (2..4-grams) and with today's (unbounded, min 1).
  const auto lookup_options = [](std::size_t k) {
    return specdec::ngram_options{.min_ngram = 2, .max_ngram = 4, .max_draft = k};
  };
  specdec::ngram_drafter lookup2(lookup_options(2)), lookup4(lookup_options(4)),
      lookup8(lookup_options(8));
  specdec::ngram_drafter unbounded2({.max_draft = 2}), unbounded4({.max_draft = 4}),
      unbounded8({.max_draft = 8});

  std::vector<config> configs;
  configs.push_back({"plain", 0, chains(none, 0)});
  for (std::size_t k : {2, 4, 8}) {
    configs.push_back({"layers:1", k, chains(m1, k)});
    configs.push_back({"layers:2", k, chains(m2, k)});
    configs.push_back({"layers:3", k, chains(m3, k)});
  }
  configs.push_back({"ngram 2..4", 2, chains(lookup2, 2)});
  configs.push_back({"ngram 2..4", 4, chains(lookup4, 4)});
  configs.push_back({"ngram 2..4", 8, chains(lookup8, 8)});
  configs.push_back({"ngram defaults", 2, chains(unbounded2, 2)});
  configs.push_back({"ngram defaults", 4, chains(unbounded4, 4)});
  configs.push_back({"ngram defaults", 8, chains(unbounded8, 8)});

  for (float temperature : {0.0f, 1.0f}) {
    const auto runs =
        sb::run_interleaved(configs, temperature, reps, [](std::size_t) { return false; });
    std::printf("\ntemperature %g, %d repetitions (medians)\n\n", temperature, reps);
    std::printf("| drafter | K | tok/s | speedup | accept | tok/call | draft | target | verify |\n");
    std::printf("|---|---|---|---|---|---|---|---|---|\n");
    for (std::size_t i = 0; i < configs.size(); ++i) {
      const sb::totals& t = runs.last[i];
      std::printf("| %s | %zu | %.0f | %.2f | %.2f | %.2f | %.0f%% | %.0f%% | %.0f%% |\n",
                  configs[i].name.c_str(), configs[i].k, sb::median(runs.tokens_per_second[i]),
                  sb::median(runs.speedup[i]), t.acceptance(), t.tokens_per_call(),
                  t.percent(t.draft), t.percent(t.target), t.percent(t.verify));
    }
  }
  return 0;
}
