// bench/tree_e2e_bench.cpp - multi-candidate (token tree) decoding on the real aidreams260K
// checkpoint: acceptance and tokens per target call against the tree budget, beside single-chain
// speculative decoding with the same draft, plus wall-clock tokens/s and speedup over plain
// decoding measured in the same repetition.
//
// Draft: the layer-skip draft (first L of 4 blocks, L = 3 by default) drafting trees
// 1, 2x1, 4x1, 2x2, 4x2x2, 8x2, 2x4, 4x2 with and without replacement (sampling), and chains of
// K = 1, 2, 3; prompt lookup as chains (K = 4) and as tries of 1 vs 4 candidates of up to 4
// tokens. Temperatures 0 and 1. Same 8 prompts and per-prompt seeds as e2e_bench.
//
//   cmake -S . -B build/e2e -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS=-march=native
//         -DSPECDEC_BUILD_BENCHMARKS=ON
//   cmake --build build/e2e --target tree_e2e_bench
//   build/e2e/bench/tree_e2e_bench [repetitions = 5] [draft layers = 3]
//
// Columns: nodes (draft tokens per target call, mean), accept (accepted / drafted depth: MCSD's
// acceptance rate), tok/call, tok/s (median), speedup (median of same-repetition ratios to plain
// decoding), draft / target shares of decoding time. Skips (exit 0) without the checkpoint.
#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <specdec/specdec.hpp>

#include "llama2c/model.hpp"
#include "llama2c/tokenizer.hpp"

#ifndef SPECDEC_MODELS_DIR
#define SPECDEC_MODELS_DIR "../shared/models"
#endif

namespace {

namespace l2 = specdec::llama2c;
using specdec::token_id;

const std::filesystem::path models_dir(SPECDEC_MODELS_DIR);
constexpr std::size_t new_tokens = 48;

// The prompts of e2e_bench: four free, four that quote text to continue.
const char* const prompts[] = {
    "I dreamed",
    "The stars",
    "In the quiet server room",
    "A memory",
    "I dreamed, as I sense the nodes, a gentle hum of probability. Contrast emerge, a flower, "
    "as I adjust, as I settle into a tapestry of vectors. I dreamed",
    "Contrast edges sharpen, a kaleidoscope of light. Contrast edges sharpen, a kaleidoscope",
    "a gentle hum of probability, a gentle hum of probability, a gentle hum",
    "I sense the nodes. I adjust. I settle. I sense the nodes. I adjust. I",
};

struct totals {
  std::size_t generated = 0, calls = 0, drafted = 0, nodes = 0, accepted = 0;
  double seconds = 0, draft = 0, target = 0;
  void add(const specdec::decode_stats& s) {
    generated += s.generated_tokens;
    calls += s.target_calls;
    drafted += s.drafted_tokens;
    nodes += s.drafted_nodes;
    accepted += s.accepted_tokens;
    seconds += s.total_seconds - s.prefill_seconds;
    draft += s.draft_seconds;
    target += s.target_seconds;
  }
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

struct config {
  std::string drafter, shape, draw;
  std::function<totals(float temperature)> run;
};

// Decodes every prompt once: a chain of k drafts when `tree` is empty, else trees of that shape.
template <class Drafter>
totals decode_all(l2::model& target, Drafter& drafter, std::size_t k,
                  const std::vector<std::size_t>& tree, specdec::candidate_draw draw,
                  float temperature, const std::vector<std::vector<token_id>>& encoded) {
  specdec::speculative_decoder decoder(target, drafter);
  totals t;
  for (std::size_t p = 0; p < encoded.size(); ++p) {
    specdec::generate_options o;
    o.max_new_tokens = std::min(new_tokens, target.max_size() - encoded[p].size());
    o.draft_length = k;
    o.tree = tree;
    o.tree_draw = draw;
    o.stop_tokens = {l2::tokenizer::bos_id, l2::tokenizer::eos_id};
    o.sampling = {.temperature = temperature, .seed = 1000 + p};
    t.add(decoder.generate(encoded[p], o).stats);
  }
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  const auto checkpoint = models_dir / "aidreams260K.bin";
  const auto tokenizer_file = models_dir / "aidreams260K.tok512.bin";
  if (!std::filesystem::exists(checkpoint) || !std::filesystem::exists(tokenizer_file)) {
    std::printf("tree_e2e_bench: skipped: %s or its tokenizer not found (set SPECDEC_MODELS_DIR)\n",
                checkpoint.string().c_str());
    return 0;
  }
  const int reps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 5;
  const std::size_t layers = argc > 2 ? static_cast<std::size_t>(std::atoi(argv[2])) : 3;

  auto weights = l2::load_checkpoint(checkpoint);
  l2::model target(weights);
  const l2::tokenizer tok(tokenizer_file.string(), target.vocab_size());
  std::vector<std::vector<token_id>> encoded;
  for (const char* p : prompts) encoded.push_back(tok.encode(p));

  l2::layer_skip_draft draft_model(target, layers);
  specdec::model_drafter drafter(draft_model);
  specdec::no_drafter none;
  specdec::ngram_drafter lookup({.min_ngram = 2, .max_ngram = 4, .max_draft = 4});
  const std::string skip = "layers:" + std::to_string(layers);
  using specdec::candidate_draw;
  const std::vector<std::size_t> no_tree;

  std::vector<config> configs;
  configs.push_back({"plain", "-", "-", [&](float t) {
                       return decode_all(target, none, 0, no_tree, candidate_draw::iid, t, encoded);
                     }});
  for (std::size_t k : {1, 2, 3})
    configs.push_back({skip, "chain K=" + std::to_string(k), "-", [&, k](float t) {
                         return decode_all(target, drafter, k, no_tree, candidate_draw::iid, t,
                                           encoded);
                       }});
  for (const char* shape : {"1", "2x1", "4x1", "2x2", "4x2x2", "8x2", "2x4", "4x2"}) {
    const auto tree = specdec::parse_branching(shape);
    for (candidate_draw draw : {candidate_draw::iid, candidate_draw::without_replacement})
      configs.push_back({skip, shape, draw == candidate_draw::iid ? "with" : "without",
                         [&, tree, draw](float t) {
                           return decode_all(target, drafter, 0, tree, draw, t, encoded);
                         }});
  }
  configs.push_back({"ngram", "chain K=4", "-", [&](float t) {
                       return decode_all(target, lookup, 4, no_tree, candidate_draw::iid, t,
                                         encoded);
                     }});
  for (std::size_t candidates : {1, 4}) {
    std::vector<std::size_t> trie(4, 1);  // up to `candidates` continuations of up to 4 tokens
    trie[0] = candidates;
    configs.push_back({"ngram", "trie " + std::to_string(candidates) + "x4", "-",
                       [&, trie](float t) {
                         return decode_all(target, lookup, 0, trie, candidate_draw::iid, t,
                                           encoded);
                       }});
  }

  for (float temperature : {0.0f, 1.0f}) {
    for (auto& c : configs) c.run(temperature);  // warm-up
    std::vector<std::vector<double>> tps(configs.size()), speedup(configs.size());
    std::vector<totals> last(configs.size());
    for (int r = 0; r < reps; ++r) {
      std::vector<double> rate(configs.size());
      for (std::size_t i = 0; i < configs.size(); ++i) {
        // Greedy trees are deterministic top-k: with/without replacement are the same run.
        if (temperature == 0.0f && configs[i].draw == "without") continue;
        last[i] = configs[i].run(temperature);
        rate[i] = static_cast<double>(last[i].generated) / last[i].seconds;
        tps[i].push_back(rate[i]);
        speedup[i].push_back(rate[i] / rate[0]);
      }
    }
    std::printf("\ntemperature %g, draft %s, %d repetitions (medians)\n\n", temperature,
                skip.c_str(), reps);
    std::printf("| drafter | shape | replacement | nodes | accept | tok/call | tok/s | speedup | "
                "draft | target |\n");
    std::printf("|---|---|---|---|---|---|---|---|---|---|\n");
    for (std::size_t i = 0; i < configs.size(); ++i) {
      if (tps[i].empty()) continue;
      const totals& t = last[i];
      std::printf("| %s | %s | %s | %.1f | %.2f | %.2f | %.0f | %.2f | %.0f%% | %.0f%% |\n",
                  configs[i].drafter.c_str(), configs[i].shape.c_str(),
                  temperature == 0.0f && configs[i].draw == "with" ? "top-k"
                                                                    : configs[i].draw.c_str(),
                  static_cast<double>(t.nodes) / t.calls,
                  t.drafted ? static_cast<double>(t.accepted) / t.drafted : 0.0,
                  static_cast<double>(t.generated) / t.calls, median(tps[i]), median(speedup[i]),
                  100 * t.draft / t.seconds, 100 * t.target / t.seconds);
    }
  }
  return 0;
}
