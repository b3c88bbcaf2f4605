// bench/e2e_bench.cpp - end-to-end speculative decoding on the real aidreams260K checkpoint:
// plain decoding vs the layer-skip draft (L = 1, 2, 3) vs prompt lookup (n-gram), at greedy and
// temperature 1, K in {2, 4, 8}, over 8 fixed prompts (4 free, 4 that quote text to continue).
//
// A plain program that prints markdown tables (not a Google Benchmark binary: one row needs a
// whole set of generations). Per repetition, every configuration decodes all prompts with the
// same per-prompt seeds, configurations interleaved so that machine noise hits them alike; the
// plain-decoding reference is measured in the same repetition and the speedup is the median over
// repetitions of (tokens/s of the config) / (tokens/s of plain decoding in that repetition).
//
//   cmake -S . -B build/e2e -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS=-march=native
//         -DSPECDEC_BUILD_BENCHMARKS=ON
//   cmake --build build/e2e --target e2e_bench
//   build/e2e/bench/e2e_bench [repetitions = 7]
//
// Columns: tok/s (median), speedup (median of same-repetition ratios), accept (accepted / drafted
// positions), tok/call (generated tokens per target call), draft / target / verify (shares of
// decoding time, prompt excluded, from decode_stats). Skips (exit 0) without the checkpoint.
#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
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

// Free prompts, then prompts that quote text the model should continue or repeat (the first is
// the model's own greedy output for "I dreamed", quoted and restarted).
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
constexpr std::size_t num_prompts = sizeof prompts / sizeof prompts[0];

struct totals {
  std::size_t generated = 0, calls = 0, drafted = 0, accepted = 0;
  double seconds = 0, draft = 0, target = 0, verify = 0;
  void add(const specdec::decode_stats& s) {
    generated += s.generated_tokens;
    calls += s.target_calls;
    drafted += s.drafted_tokens;
    accepted += s.accepted_tokens;
    seconds += s.total_seconds - s.prefill_seconds;
    draft += s.draft_seconds;
    target += s.target_seconds;
    verify += s.verify_seconds;
  }
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

struct config {
  std::string name;
  std::size_t k = 0;
  // Decodes every prompt once with the given sampling; returns the run's totals.
  std::function<totals(float temperature)> run;
};

template <class Drafter>
totals decode_all(l2::model& target, Drafter& drafter, std::size_t k, float temperature,
                  const std::vector<std::vector<token_id>>& encoded) {
  specdec::speculative_decoder decoder(target, drafter);
  totals t;
  for (std::size_t p = 0; p < encoded.size(); ++p) {
    specdec::generate_options o;
    o.max_new_tokens = std::min(new_tokens, target.max_size() - encoded[p].size());
    o.draft_length = k;
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
    std::printf("e2e_bench: skipped: %s or its tokenizer not found (set SPECDEC_MODELS_DIR)\n",
                checkpoint.string().c_str());
    return 0;
  }
  const int reps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 7;

  auto weights = l2::load_checkpoint(checkpoint);
  l2::model target(weights);
  const l2::tokenizer tok(tokenizer_file.string(), target.vocab_size());
  std::vector<std::vector<token_id>> encoded;
  std::printf("prompts (tokens incl. BOS; %zu new tokens each, stop at BOS/EOS):\n", new_tokens);
  for (const char* p : prompts) {
    encoded.push_back(tok.encode(p));
    std::printf("  %3zu  \"%s\"\n", encoded.back().size(), p);
  }

  l2::layer_skip_draft d1(target, 1), d2(target, 2), d3(target, 3);
  specdec::model_drafter m1(d1), m2(d2), m3(d3);
  specdec::no_drafter none;
  std::vector<config> configs;
  configs.push_back({"plain", 0, [&](float t) { return decode_all(target, none, 0, t, encoded); }});
  for (std::size_t k : {2, 4, 8}) {
    configs.push_back({"layers:1", k, [&, k](float t) { return decode_all(target, m1, k, t, encoded); }});
    configs.push_back({"layers:2", k, [&, k](float t) { return decode_all(target, m2, k, t, encoded); }});
    configs.push_back({"layers:3", k, [&, k](float t) { return decode_all(target, m3, k, t, encoded); }});
  }
  std::vector<std::unique_ptr<specdec::ngram_drafter>> lookups;
  for (std::size_t k : {2, 4, 8}) {
    lookups.push_back(std::make_unique<specdec::ngram_drafter>(
        specdec::ngram_options{.min_ngram = 2, .max_ngram = 4, .max_draft = k}));
    auto* lookup = lookups.back().get();
    configs.push_back({"ngram", k, [&, k, lookup](float t) { return decode_all(target, *lookup, k, t, encoded); }});
  }

  for (float temperature : {0.0f, 1.0f}) {
    for (auto& c : configs) c.run(temperature);  // warm-up: scratch growth, caches
    std::vector<std::vector<double>> tps(configs.size()), speedup(configs.size());
    std::vector<totals> last(configs.size());
    for (int r = 0; r < reps; ++r) {
      std::vector<double> rate(configs.size());
      for (std::size_t i = 0; i < configs.size(); ++i) {
        last[i] = configs[i].run(temperature);
        rate[i] = static_cast<double>(last[i].generated) / last[i].seconds;
        tps[i].push_back(rate[i]);
      }
      for (std::size_t i = 0; i < configs.size(); ++i) speedup[i].push_back(rate[i] / rate[0]);
    }
    std::printf("\ntemperature %g, %d repetitions (medians)\n\n", temperature, reps);
    std::printf("| drafter | K | tok/s | speedup | accept | tok/call | draft | target | verify |\n");
    std::printf("|---|---|---|---|---|---|---|---|---|\n");
    for (std::size_t i = 0; i < configs.size(); ++i) {
      const totals& t = last[i];
      std::printf("| %s | %zu | %.0f | %.2f | %.2f | %.2f | %.0f%% | %.0f%% | %.0f%% |\n",
                  configs[i].name.c_str(), configs[i].k, median(tps[i]), median(speedup[i]),
                  t.drafted ? static_cast<double>(t.accepted) / t.drafted : 0.0,
                  static_cast<double>(t.generated) / t.calls, 100 * t.draft / t.seconds,
                  100 * t.target / t.seconds, 100 * t.verify / t.seconds);
    }
  }
  return 0;
}
