// tests/llamacpp/llamacpp_stories_test.cpp - the adapters on stories260K, the second real model
// (grouped-query attention: 8 query heads on 4 KV heads), as make_gguf.sh converts it: llama.cpp
// and the llama2.c engine on the source checkpoint agree (greedy tokens and logits), the
// conformance kit passes on context_model and tree_model, and greedy speculative output equals
// plain greedy with its first 4 layers as the draft model (chains and trees) and prompt lookup.
// Skips (exit 77) when stories.gguf was not made (no ../shared/models).
#include <catch2/catch.hpp>

#include "catch_runner.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include <llama2c/engine/model.hpp>
#include <llama2c/engine/tokenizer.hpp>
#include <llamacpp/adapters/context_model.hpp>
#include <llamacpp/adapters/gguf_model.hpp>
#include <llamacpp/adapters/tree_model.hpp>
#include <specdec/specdec.hpp>
#include <specdec/testing.hpp>

using specdec::token_id;
using namespace specdec::llamacpp;

namespace {

const std::filesystem::path gguf_dir{SPECDEC_GGUF_DIR};
const std::filesystem::path models_dir{SPECDEC_MODELS_DIR};

const gguf_model& target() {
  static const gguf_model m((gguf_dir / "stories.gguf").string());
  return m;
}
const gguf_model& draft() {
  static const gguf_model m((gguf_dir / "stories-draft.gguf").string());
  return m;
}

std::vector<std::vector<token_id>> prompts() {
  const specdec::llama2c::tokenizer tok(models_dir / "stories260K.tok512.bin");
  return {tok.encode("Once upon a time"), tok.encode("Lily and Ben went to the park"),
          tok.encode("The little dog was sad")};
}

constexpr std::size_t n_new = 100;
constexpr std::size_t n_ctx = 256;

specdec::generate_options greedy() {
  specdec::generate_options o;
  o.max_new_tokens = n_new;
  o.sampling.temperature = 0.0f;
  return o;
}

std::vector<token_id> plain_greedy(std::span<const token_id> prompt) {
  context_model m(target(), {.n_ctx = n_ctx, .n_threads = 1});
  specdec::no_drafter none;
  specdec::speculative_decoder decoder(m, none);
  auto o = greedy();
  o.draft_length = 0;
  return decoder.generate(prompt, o).tokens;
}

}  // namespace

TEST_CASE("llamacpp stories260K: llama.cpp's greedy tokens and logits are the llama2.c engine's") {
  // llama.cpp keeps K and V in F16 (its default cache type), the engine in F32: that rounding is
  // the difference (measured 0.020-0.023 over the three prompts; 8.7e-6 to 9.8e-6 with an F32
  // cache, type_k/type_v, in a scratch build), larger than aidreams260K's 4.4e-3 over longer runs.
  specdec::llama2c::model ref(models_dir / "stories260K.bin", {.max_context = n_ctx, .threads = 1});
  for (const auto& prompt : prompts()) {
    const auto want = specdec::generate_autoregressive(ref, prompt, greedy()).tokens;
    REQUIRE(want.size() == n_new);
    const auto got = plain_greedy(prompt);
    CHECK(got == want);

    std::vector<token_id> seq = prompt;
    seq.insert(seq.end(), want.begin(), want.end() - 1);
    const std::size_t v = ref.vocab_size();
    std::vector<float> lr(seq.size() * v), lm(seq.size() * v);
    ref.truncate(0);
    ref.append(seq, lr);
    context_model m(target(), {.n_ctx = n_ctx, .n_threads = 1});
    REQUIRE(m.vocab_size() == v);
    m.append(seq, lm);
    float d = 0.0f;
    for (std::size_t i = 0; i < lr.size(); ++i) d = std::max(d, std::abs(lr[i] - lm[i]));
    WARN("stories260K: llama2.c vs llama.cpp (F32 GGUF), " << seq.size()
                                                           << " positions: logits max |diff| " << d);
    CHECK(d <= 5e-2f);
  }
}

TEST_CASE("llamacpp stories260K: context_model and tree_model pass the conformance kit (F32)") {
  specdec::testing::conformance_options o;
  o.tokens = prompts()[1];
  const auto more = prompts()[2];
  o.tokens.insert(o.tokens.end(), more.begin() + 1, more.end());
  // F32 rows of a batch and of one token take different kernels, so they agree to rounding:
  // stories260K's differed by up to 1.4e-3 in a tree call on an AVX2/FMA build of ggml (within
  // 1e-3 on an SSE-only build); a cache bug differs by order 1.
  o.tolerance = 5e-3f;
  SECTION("context_model") {
    const auto rep = specdec::testing::run_all(
        [] { return context_model(target(), {.n_ctx = n_ctx, .n_threads = 1}); }, o);
    INFO(rep.message);
    CHECK(rep.ok);
  }
  SECTION("tree_model") {
    const auto rep = specdec::testing::run_all(
        [] { return tree_model(target(), tree_options(16, {.n_ctx = n_ctx, .n_threads = 1})); }, o);
    INFO(rep.message);
    CHECK(rep.ok);
  }
}

TEST_CASE("llamacpp stories260K: greedy speculative output equals plain greedy") {
  const auto ps = prompts();
  std::vector<std::vector<token_id>> plain;
  for (const auto& prompt : ps) plain.push_back(plain_greedy(prompt));
  auto o = greedy();
  SECTION("draft model (the first 4 layers), chains and a tree in one llama_decode") {
    tree_model t(target(), tree_options(8, {.n_ctx = n_ctx, .n_threads = 1}));
    context_model d(draft(), {.n_ctx = n_ctx, .n_threads = 1});
    specdec::model_drafter drafter(d);
    specdec::speculative_decoder decoder(t, drafter);
    // K = 4 on every prompt, K = 1 and a tree on the first, to keep the test short
    // (llamacpp_decoder_test covers more K and shapes on aidreams260K).
    o.draft_length = 4;
    for (std::size_t p = 0; p < ps.size(); ++p) {
      INFO("prompt " << p << ", K = 4");
      CHECK(decoder.generate(ps[p], o).tokens == plain[p]);
    }
    o.draft_length = 1;
    CHECK(decoder.generate(ps[0], o).tokens == plain[0]);
    o.tree = specdec::parse_branching("4x2x1");
    CHECK(decoder.generate(ps[0], o).tokens == plain[0]);
  }
  SECTION("prompt lookup") {
    context_model t(target(), {.n_ctx = n_ctx, .n_threads = 1});
    specdec::ngram_drafter lookup({.min_ngram = 1, .max_ngram = 4});
    specdec::speculative_decoder decoder(t, lookup);
    o.draft_length = 6;
    for (std::size_t p = 0; p < ps.size(); ++p)
      CHECK(decoder.generate(ps[p], o).tokens == plain[p]);
  }
}

int main(int argc, char* argv[]) {
  for (const char* f : {"stories.gguf", "stories-draft.gguf"})
    if (!std::filesystem::exists(gguf_dir / f)) {
      std::cout << "skipping: " << (gguf_dir / f).string()
                << " not found; make_gguf.sh makes it from ../shared/models (absent here?)\n";
      return 77;
    }
  specdec::llamacpp::set_llama_log_level(true);
  return specdec_test::run_catch(argc, argv);
}
