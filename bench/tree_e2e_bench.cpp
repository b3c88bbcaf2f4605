// bench/tree_e2e_bench.cpp - multi-candidate (token tree) decoding on the real aidreams260K
// checkpoint: acceptance and tokens per target call against the tree budget, beside single-chain
// speculative decoding with the same draft, plus wall-clock tokens/s and speedup over plain
// decoding measured in the same repetition.
//
// Draft: the layer-skip draft (first L of 4 blocks, L = 3 by default) drafting trees
// 1, 2x1, 4x1, 2x2, 4x2x2, 8x2, 2x4, 4x2 with and without replacement (sampling), and chains of
// K = 1, 2, 3; prompt lookup as chains (K = 4) and as tries of 1 vs 4 candidates of up to 4
// tokens. Temperatures 0 and 1. Same 8 prompts and per-prompt seeds as e2e_bench
// (bench/support/e2e.hpp).
//
//   cmake --preset bench && cmake --build --preset bench --target tree_e2e_bench
//   build/bench/bench/tree_e2e_bench [repetitions = 5] [draft layers = 3]
//   (docs/benchmarks.md's table: `tree_e2e_bench 3 3`, 3 repetitions)
//
// Columns: nodes (draft tokens per target call, mean), accept (accepted / drafted depth: MCSD's
// acceptance rate), tok/call, tok/s (median), speedup (median of same-repetition ratios to plain
// decoding), draft / target shares of decoding time. Skips (exit 0) without the checkpoint.
#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <utility>
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
  std::string drafter, shape, draw;
  std::function<sb::totals(float temperature)> run;
};

}  // namespace

int main(int argc, char** argv) {
  if (sb::skip_without("tree_e2e_bench", {sb::checkpoint_path, sb::tokenizer_path})) return 0;
  const int reps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 5;
  const std::size_t layers = argc > 2 ? static_cast<std::size_t>(std::atoi(argv[2])) : 3;

  auto weights = l2::load_checkpoint(sb::checkpoint_path);
  l2::model target(weights);
  const l2::tokenizer tok(sb::tokenizer_path, target.vocab_size());
  const auto encoded = sb::encode_prompts(tok, false);

  l2::layer_skip_draft draft_model(target, layers);
  specdec::model_drafter drafter(draft_model);
  specdec::no_drafter none;
  specdec::ngram_drafter lookup({.min_ngram = 2, .max_ngram = 4, .max_draft = 4});
  const std::string skip = "layers:" + std::to_string(layers);
  using specdec::candidate_draw;

  // All prompts decoded with `d`: chains of up to k drafts when `tree` is empty, else trees.
  const auto decode = [&](auto& d, std::size_t k, std::vector<std::size_t> tree,
                          candidate_draw draw) {
    return [&d, &target, &encoded, k, tree = std::move(tree), draw](float t) {
      return sb::decode_all(target, d, k, tree, draw, t, encoded);
    };
  };

  std::vector<config> configs;
  configs.push_back({"plain", "-", "-", decode(none, 0, {}, candidate_draw::iid)});
  for (std::size_t k : {1, 2, 3})
    configs.push_back({skip, "chain K=" + std::to_string(k), "-",
                       decode(drafter, k, {}, candidate_draw::iid)});
  for (const char* shape : {"1", "2x1", "4x1", "2x2", "4x2x2", "8x2", "2x4", "4x2"})
    for (candidate_draw draw : {candidate_draw::iid, candidate_draw::without_replacement})
      configs.push_back({skip, shape, draw == candidate_draw::iid ? "with" : "without",
                         decode(drafter, 0, specdec::parse_branching(shape), draw)});
  configs.push_back({"ngram", "chain K=4", "-", decode(lookup, 4, {}, candidate_draw::iid)});
  for (std::size_t candidates : {1, 4}) {
    std::vector<std::size_t> trie(4, 1);  // up to `candidates` continuations of up to 4 tokens
    trie[0] = candidates;
    configs.push_back({"ngram", "trie " + std::to_string(candidates) + "x4", "-",
                       decode(lookup, 0, trie, candidate_draw::iid)});
  }

  for (float temperature : {0.0f, 1.0f}) {
    // Greedy trees are deterministic top-k: with/without replacement are the same run.
    const auto runs = sb::run_interleaved(configs, temperature, reps, [&](std::size_t i) {
      return temperature == 0.0f && configs[i].draw == "without";
    });
    std::printf("\ntemperature %g, draft %s, %d repetitions (medians)\n\n", temperature,
                skip.c_str(), reps);
    std::printf("| drafter | shape | replacement | nodes | accept | tok/call | tok/s | speedup | "
                "draft | target |\n");
    std::printf("|---|---|---|---|---|---|---|---|---|---|\n");
    for (std::size_t i = 0; i < configs.size(); ++i) {
      if (runs.tokens_per_second[i].empty()) continue;
      const sb::totals& t = runs.last[i];
      std::printf("| %s | %s | %s | %.1f | %.2f | %.2f | %.0f | %.2f | %.0f%% | %.0f%% |\n",
                  configs[i].drafter.c_str(), configs[i].shape.c_str(),
                  temperature == 0.0f && configs[i].draw == "with" ? "top-k"
                                                                    : configs[i].draw.c_str(),
                  t.nodes_per_call(), t.acceptance(), t.tokens_per_call(),
                  sb::median(runs.tokens_per_second[i]), sb::median(runs.speedup[i]),
                  t.percent(t.draft), t.percent(t.target));
    }
  }
  return 0;
}
