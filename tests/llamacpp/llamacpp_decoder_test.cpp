// tests/llamacpp/llamacpp_decoder_test.cpp - specdec's decoder on llama.cpp contexts: greedy
// speculative output (a GGUF draft model in chains and trees, n-gram lookup, block verification)
// equals plain greedy decoding through the same adapter token for token (plain decoding = one
// llama_decode per token, as llama.cpp's own examples do), the reference continuation of run.c
// comes out, sampled runs repeat at a fixed seed, and a tree shape beyond the context's limits
// is drafted smaller rather than refused.
#include "common.hpp"

#include <llama2c/engine/reference.hpp>
#include <llamacpp/adapters/context_model.hpp>
#include <llamacpp/adapters/tree_model.hpp>
#include <specdec/specdec.hpp>

using specdec::token_id;
using namespace specdec::llamacpp;
namespace t = llamacpp_test;

namespace {

std::vector<token_id> plain_greedy(const gguf_model& model, std::span<const token_id> prompt,
                                   std::size_t n) {
  context_model m(model, {.n_ctx = 256});
  specdec::no_drafter none;
  specdec::speculative_decoder decoder(m, none);
  specdec::generate_options o;
  o.max_new_tokens = n;
  o.sampling.temperature = 0.0f;
  o.draft_length = 0;
  return decoder.generate(prompt, o).tokens;
}

}  // namespace

TEST_CASE("llamacpp decoder: plain greedy on the GGUF continues as llama2.c's run.c does") {
  // run.c's reference: BOS, then 96 ids of which the first 6 are the prompt "I dreamed".
  const auto& ref = specdec::llama2c::reference_ids;
  std::vector<token_id> prompt{1};
  prompt.insert(prompt.end(), ref.begin(), ref.begin() + 6);
  const auto got = plain_greedy(t::target(), prompt, ref.size() - 6);
  const std::vector<token_id> want(ref.begin() + 6, ref.end());
  CHECK(got == want);
}

TEST_CASE("llamacpp decoder: greedy speculative output equals plain greedy, every drafter") {
  const std::size_t n = 100;
  // Each section runs over every prompt: a SECTION inside a loop over prompts would be entered
  // for the first prompt only (Catch enters one section per run of the test case).
  const auto each_prompt = [&](auto&& check) {
    for (std::size_t i = 0; i < t::prompts.size(); ++i) {
      const auto& prompt = t::prompts[i];
      const auto plain = plain_greedy(t::target(), prompt, n);
      REQUIRE(plain.size() == n);
      specdec::generate_options o;
      o.max_new_tokens = n;
      o.sampling.temperature = 0.0f;
      INFO("prompt " << i);
      check(prompt, plain, o);
    }
  };

  SECTION("draft model, chains K = 1..8, token and block verification") {
    tree_model target(t::target(), tree_options(32, {.n_ctx = 256}));
    context_model draft(t::draft(), {.n_ctx = 256});
    specdec::model_drafter drafter(draft);
    specdec::speculative_decoder decoder(target, drafter);
    each_prompt([&](const auto& prompt, const auto& plain, specdec::generate_options& o) {
      for (std::size_t k : {1u, 3u, 5u, 8u})
        for (auto v : {specdec::verification_rule::token, specdec::verification_rule::block}) {
          o.draft_length = k;
          o.verification = v;
          INFO("K = " << k << (v == specdec::verification_rule::block ? ", block" : ""));
          CHECK(decoder.generate(prompt, o).tokens == plain);
        }
      o.verification = specdec::verification_rule::token;
      for (const char* shape : {"2x2", "4x2x1", "3x3x2x1"}) {
        o.tree = specdec::parse_branching(shape);
        INFO("tree " << shape << " in one llama_decode");
        CHECK(decoder.generate(prompt, o).tokens == plain);
      }
    });
  }
  SECTION("n-gram lookup, chain and trie") {
    context_model target(t::target(), {.n_ctx = 256});
    specdec::ngram_drafter lookup({.min_ngram = 1, .max_ngram = 4});
    specdec::speculative_decoder decoder(target, lookup);
    each_prompt([&](const auto& prompt, const auto& plain, specdec::generate_options& o) {
      o.draft_length = 6;
      CHECK(decoder.generate(prompt, o).tokens == plain);
    });
  }
  SECTION("n-gram trie in one llama_decode") {
    tree_model target(t::target(), tree_options(16, {.n_ctx = 256}));
    specdec::ngram_drafter lookup({.min_ngram = 1, .max_ngram = 4});
    specdec::speculative_decoder decoder(target, lookup);
    each_prompt([&](const auto& prompt, const auto& plain, specdec::generate_options& o) {
      o.tree = {4, 1, 1, 1};
      CHECK(decoder.generate(prompt, o).tokens == plain);
    });
  }
}

TEST_CASE("llamacpp decoder: a tree option beyond tree_model's limits is drafted smaller") {
  // The shape asks for more than one llama_decode of the context takes; the decoder reads
  // max_tree_leaves() (n_seq_max) and max_tree_size() (n_batch) and cuts the tree's depth,
  // so every step still drafts (a smaller tree) and the output is plain greedy's.
  const std::size_t n = 60;
  const auto& prompt = t::prompts[0];
  const auto plain = plain_greedy(t::target(), prompt, n);
  context_model draft(t::draft(), {.n_ctx = 256});
  specdec::model_drafter drafter(draft);
  specdec::generate_options o;
  o.max_new_tokens = n;
  o.sampling.temperature = 0.0f;
  SECTION("2 leaves (n_seq_max = 2), tree 2x3: depth 1 kept") {
    tree_model target(t::target(), tree_options(2, {.n_ctx = 256}));
    CHECK(target.max_tree_leaves() == 2);
    specdec::speculative_decoder decoder(target, drafter);
    o.tree = {2, 3};
    const auto r = decoder.generate(prompt, o);
    CHECK(r.tokens == plain);
    CHECK(r.stats.drafted_nodes > 0);
    CHECK(r.stats.accepted_tokens > 0);
  }
  SECTION("n_batch = 4 nodes, tree 2x2x2 (15 nodes with the root): depth 1 kept") {
    tree_model target(t::target(), tree_options(4, {.n_ctx = 256, .n_batch = 4}));
    CHECK(target.max_tree_size() == 4);
    specdec::speculative_decoder decoder(target, drafter);
    o.tree = {2, 2, 2};
    const auto r = decoder.generate(prompt, o);
    CHECK(r.tokens == plain);
    CHECK(r.stats.drafted_nodes > 0);
    CHECK(r.stats.accepted_tokens > 0);
  }
}

TEST_CASE("llamacpp decoder: a sampled run repeats at a fixed seed and differs at another") {
  tree_model target(t::target(), tree_options(16, {.n_ctx = 256}));
  context_model draft(t::draft(), {.n_ctx = 256});
  specdec::model_drafter drafter(draft);
  specdec::speculative_decoder decoder(target, drafter);
  specdec::generate_options o;
  o.max_new_tokens = 60;
  o.sampling = {.temperature = 0.8f, .seed = 7};
  o.draft_length = 4;
  const auto a = decoder.generate(t::prompts[0], o).tokens;
  CHECK(decoder.generate(t::prompts[0], o).tokens == a);
  o.sampling.seed = 8;
  CHECK(decoder.generate(t::prompts[0], o).tokens != a);
}

TEST_CASE("llamacpp decoder: a prompt longer than the context is refused, naming it") {
  context_model target(t::target(), {.n_ctx = 256});
  specdec::no_drafter none;
  specdec::speculative_decoder decoder(target, none);
  const std::vector<token_id> prompt(target.max_size() + 1, 5);
  REQUIRE_THROWS_WITH(decoder.generate(prompt, {}),
                      Catch::Contains("exceed the target's max_size " +
                                      std::to_string(target.max_size())));
  CHECK(target.size() == 0);
}

TEST_CASE("llamacpp decoder: coupled sampling emits plain decoding's tokens with the same seed") {
  // Sampled, T = 0.8 with top-k 40 and top-p 0.95 (llama.cpp's defaults), seeds 1..3: the draft
  // model's chains and trees in one llama_decode give plain coupled decoding's very tokens.
  for (const auto& prompt : t::prompts) {
    for (std::uint64_t seed = 1; seed <= 3; ++seed) {
      specdec::generate_options o;
      o.max_new_tokens = 60;
      o.sampling.temperature = 0.8f;
      o.sampling.top_k = 40;
      o.sampling.top_p = 0.95f;
      o.sampling.seed = seed;
      o.verification = specdec::verification_rule::coupled;
      context_model plain_model(t::target(), {.n_ctx = 256});
      const auto plain = specdec::generate_autoregressive(plain_model, prompt, o).tokens;
      tree_model target(t::target(), tree_options(32, {.n_ctx = 256}));
      context_model draft(t::draft(), {.n_ctx = 256});
      specdec::model_drafter drafter(draft);
      specdec::speculative_decoder decoder(target, drafter);
      for (const std::size_t k : {2u, 5u}) {
        o.draft_length = k;
        INFO("seed " << seed << ", K = " << k);
        const auto r = decoder.generate(prompt, o);
        CHECK(r.tokens == plain);
        CHECK(r.stats.accepted_tokens > 0);
      }
      o.tree = {2, 2, 1};
      INFO("seed " << seed << ", tree 2x2x1");
      CHECK(decoder.generate(prompt, o).tokens == plain);
    }
  }
}
