// tests/llamacpp/llamacpp_grammar_test.cpp - a GBNF grammar through specdec's row processor
// (llamacpp/adapters/grammar_processor.hpp): greedy speculative output with the grammar equals plain
// greedy with the grammar token for token (draft model chains, trees in one llama_decode, n-gram
// lookup, whose drafts the grammar may reject), every output is accepted by the grammar, sampled
// output obeys it too, a dead end of the grammar met only past a rejected draft changes nothing,
// and a grammar that cannot be read or parsed is refused naming its file.
#include "common.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <llamacpp/adapters/context_model.hpp>
#include <llamacpp/adapters/grammar_processor.hpp>
#include <llamacpp/adapters/tree_model.hpp>
#include <llamacpp/adapters/vocab_text.hpp>
#include <specdec/specdec.hpp>

using specdec::token_id;
using namespace specdec::llamacpp;
namespace t = llamacpp_test;

namespace {

// Lower-case words separated by single spaces: no capitals, digits, punctuation or new lines,
// which the story model writes often, so the mask changes what greedy decoding emits.
const char* const words_gbnf = "root ::= (\" \" [a-z]+)+\n";

std::vector<token_id> plain(const gguf_model& model, std::span<const token_id> prompt,
                            specdec::generate_options o) {
  context_model m(model, {.n_ctx = 256});
  specdec::no_drafter none;
  specdec::speculative_decoder decoder(m, none);
  o.draft_length = 0;
  o.tree.clear();
  return decoder.generate(prompt, o).tokens;
}

/// Proposes the same tokens every step (deterministic: no q rows).
struct fixed_drafter {
  std::vector<token_id> tokens;
  void propose(std::span<const token_id>, std::size_t k, const specdec::sampling_params&,
               specdec::rng&, specdec::draft& out) {
    out.clear();
    for (std::size_t i = 0; i < std::min(k, tokens.size()); ++i) out.tokens.push_back(tokens[i]);
  }
  void accept(std::span<const token_id>) {}
  void reset() {}
};

}  // namespace

TEST_CASE("llamacpp grammar: greedy speculative output with a grammar equals plain greedy with it") {
  auto g = grammar_processor::from_text(t::target(), words_gbnf, "words.gbnf");
  const std::size_t n = 80;
  for (const auto& prompt : t::prompts) {
    specdec::generate_options o;
    o.max_new_tokens = n;
    o.sampling.temperature = 0.0f;
    const auto free_text = plain(t::target(), prompt, o);
    g.start(prompt);
    o.sampling.processor = g;
    const auto want = plain(t::target(), prompt, o);
    REQUIRE(!want.empty());
    CHECK(g.accepts(want));
    CHECK(!g.accepts(free_text));  // the grammar bites: unconstrained greedy leaves it
    CHECK(want != free_text);

    SECTION("draft model: chains K = 1, 4, 8 (token and block), trees in one llama_decode") {
      tree_model target(t::target(), tree_options(32, {.n_ctx = 256}));
      context_model draft(t::draft(), {.n_ctx = 256});
      specdec::model_drafter drafter(draft);
      specdec::speculative_decoder decoder(target, drafter);
      for (std::size_t k : {1u, 4u, 8u})
        for (auto v : {specdec::verification_rule::token, specdec::verification_rule::block}) {
          o.draft_length = k;
          o.verification = v;
          INFO("K = " << k << (v == specdec::verification_rule::block ? ", block" : ""));
          g.start(prompt);
          const auto got = decoder.generate(prompt, o).tokens;
          CHECK(got == want);
          CHECK(g.accepts(got));
        }
      o.verification = specdec::verification_rule::token;
      for (const char* shape : {"2x2", "4x2x1", "3x3x2x1"}) {
        o.tree = specdec::parse_branching(shape);
        INFO("tree " << shape);
        g.start(prompt);
        const auto got = decoder.generate(prompt, o).tokens;
        CHECK(got == want);
        CHECK(g.accepts(got));
      }
    }
    SECTION("n-gram lookup (drafts the grammar may reject), chain and trie") {
      tree_model target(t::target(), tree_options(16, {.n_ctx = 256}));
      specdec::ngram_drafter lookup({.min_ngram = 1, .max_ngram = 4});
      specdec::speculative_decoder decoder(target, lookup);
      o.draft_length = 6;
      g.start(prompt);
      CHECK(decoder.generate(prompt, o).tokens == want);
      o.tree = {4, 1, 1, 1};
      g.start(prompt);
      CHECK(decoder.generate(prompt, o).tokens == want);
    }
  }
}

TEST_CASE("llamacpp grammar: sampled speculative output at a fixed seed obeys the grammar") {
  auto g = grammar_processor::from_text(t::target(), words_gbnf, "words.gbnf");
  tree_model target(t::target(), tree_options(16, {.n_ctx = 256}));
  context_model draft(t::draft(), {.n_ctx = 256});
  specdec::model_drafter drafter(draft);
  specdec::speculative_decoder decoder(target, drafter);
  specdec::generate_options o;
  o.max_new_tokens = 60;
  o.sampling = {.temperature = 0.8f, .seed = 7};
  o.sampling.processor = g;
  for (const auto& prompt : t::prompts) {
    o.draft_length = 4;
    o.tree.clear();
    g.start(prompt);
    const auto a = decoder.generate(prompt, o).tokens;
    CHECK(g.accepts(a));
    g.start(prompt);
    CHECK(decoder.generate(prompt, o).tokens == a);  // repeats at the seed
    o.tree = {2, 2, 1};
    g.start(prompt);
    CHECK(g.accepts(decoder.generate(prompt, o).tokens));
  }
}

TEST_CASE("llamacpp grammar: a file that cannot be read or parsed is refused, naming it") {
  const auto dir = std::filesystem::temp_directory_path();
  const std::string missing = (dir / "specdec-no-such-grammar.gbnf").string();
  REQUIRE_THROWS_WITH(grammar_processor(t::target(), missing),
                      "grammar '" + missing + "': cannot read it");
  const std::string bad = (dir / "specdec-bad-grammar.gbnf").string();
  std::ofstream(bad) << "root ::= (\"a\"\n";
  REQUIRE_THROWS_WITH(grammar_processor(t::target(), bad),
                      Catch::StartsWith("grammar '" + bad + "': llama.cpp cannot parse it"));
  std::ofstream(bad) << "  \n";
  REQUIRE_THROWS_WITH(grammar_processor(t::target(), bad), "grammar '" + bad + "': empty");
  std::remove(bad.c_str());
}

TEST_CASE("llamacpp grammar: copies share the cache - a prefix off the prompt is refused") {
  auto g = grammar_processor::from_text(t::target(), "root ::= [0-9]+\n", "digits.gbnf");
  const std::vector<token_id> prompt{1, 303};
  g.start(prompt);
  const auto copy = g;
  std::vector<float> row(t::target().vocab_size(), 0.0f);
  copy(prompt, row);
  std::size_t allowed = 0;
  for (const float x : row) allowed += std::isfinite(x) ? 1 : 0;
  CHECK(allowed > 0);
  CHECK(allowed < row.size() / 4);
  const std::vector<token_id> other{1, 304};
  REQUIRE_THROWS_WITH(g(other, row), Catch::Contains("does not start with the prompt"));
}

TEST_CASE("llamacpp grammar: a dead end reached only through a rejected draft ends that draft") {
  // Lower-case words, or " I" then a NUL, which no token can produce: " I" (one token) is a
  // legal next token after which nothing is, and the processor throws there. The target never
  // takes it under the grammar (plain greedy completes); drafts do, so the dead end is met only
  // past a draft the target rejects: the verifier must not process the row past a rejected
  // draft, and the draft model's drafter must end its draft there instead of failing the step.
  const char* const dead_gbnf = "root ::= (\" \" word)+\nword ::= [a-z]+ | \"I\" \"\\x00\"\n";
  auto g = grammar_processor::from_text(t::target(), dead_gbnf, "dead-end.gbnf");
  const token_id way_in = 303;
  REQUIRE(piece(t::target(), way_in) == " I");
  std::size_t dead_ends = 0;
  auto counting = [&](std::span<const token_id> prefix, std::span<float> logits) {
    try {
      g(prefix, logits);
    } catch (const std::runtime_error&) {
      ++dead_ends;
      throw;
    }
  };
  std::vector<float> row(t::target().vocab_size());
  std::size_t drafter_dead_ends = 0;
  for (const auto& prompt : t::prompts) {
    g.start(prompt);
    std::vector<token_id> past = prompt;
    past.push_back(way_in);
    REQUIRE_THROWS_WITH(counting(past, row), Catch::Contains("no token of the vocabulary"));
    specdec::generate_options o;
    o.max_new_tokens = 80;
    o.sampling.temperature = 0.0f;
    o.sampling.processor = counting;
    g.start(prompt);
    const auto want = plain(t::target(), prompt, o);
    REQUIRE(want.size() == o.max_new_tokens);
    REQUIRE(std::find(want.begin(), want.end(), way_in) == want.end());
    CHECK(g.accepts(want));

    tree_model target(t::target(), tree_options(8, {.n_ctx = 256}));
    fixed_drafter into_dead_end{{way_in, way_in}};  // every step, the way in
    specdec::speculative_decoder fixed(target, into_dead_end);
    o.draft_length = 2;
    g.start(prompt);
    dead_ends = 0;
    CHECK(fixed.generate(prompt, o).tokens == want);
    CHECK(dead_ends == 0);  // the row past the rejected " I" is never processed

    context_model draft(t::draft(), {.n_ctx = 256});
    specdec::model_drafter drafter(draft);
    specdec::speculative_decoder wide(target, drafter);
    o.tree = {8, 1, 1};  // the draft's 8 best first tokens: " I" among them at times
    g.start(prompt);
    dead_ends = 0;
    CHECK(wide.generate(prompt, o).tokens == want);
    drafter_dead_ends += dead_ends;
  }
  CHECK(drafter_dead_ends > 0);  // the draft model did walk into the dead end
}
