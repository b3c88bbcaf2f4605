// The drafter of docs/writing-a-drafter.md, extracted from the page at build time (so the test
// follows the page): its propose on its own, and the page's exactness check over the small real
// engine of my_engine.hpp, with a phrase the target writes and one it never writes.
#include <span>
#include <stdexcept>
#include <vector>

#include <catch2/catch.hpp>

#include "writing_a_drafter_md.hpp"  // the page's compiled blocks: phrase_drafter, complete, ...

namespace {

using tokens = std::vector<specdec::token_id>;

struct session_model {  // my_engine's session as a LanguageModel (the test's own prompts only)
  my_engine::session& s;
  std::size_t vocab_size() const { return s.vocab(); }
  std::size_t size() const { return s.tokens_in_cache(); }
  std::size_t max_size() const { return s.capacity(); }
  void append(std::span<const specdec::token_id> t, std::span<float> logits) {
    s.forward(t.data(), t.size(), logits.data());
  }
  void truncate(std::size_t n) { s.rollback_to(n); }
};

tokens proposal(phrase_drafter& d, const tokens& history, std::size_t k) {
  specdec::rng gen(1);
  specdec::draft out;
  d.propose(history, k, {}, gen, out);
  CHECK(out.deterministic());
  return out.tokens;
}

}  // namespace

TEST_CASE("docs: the phrase_drafter of docs/writing-a-drafter.md proposes a phrase's rest") {
  phrase_drafter d({{1, 2, 3, 4, 5}, {2, 3, 9}}, 2);
  SECTION("the longest start that ends the history wins") {
    CHECK(proposal(d, {7, 1, 2}, 8) == tokens{3, 4, 5});
    CHECK(proposal(d, {7, 1, 2, 3}, 8) == tokens{4, 5});  // {2, 3} starts the second phrase too
    CHECK(proposal(d, {7, 2, 3}, 8) == tokens{9});
  }
  SECTION("at most k tokens") { CHECK(proposal(d, {1, 2}, 2) == tokens{3, 4}); }
  SECTION("nothing below min_match, after a whole phrase, or for k = 0") {
    CHECK(proposal(d, {7, 8, 1}, 8).empty());
    CHECK(proposal(d, {1, 2, 3, 4, 5}, 8).empty());
    CHECK(proposal(d, {1, 2}, 0).empty());
  }
  SECTION("the constructor refuses what it cannot use") {
    REQUIRE_THROWS_WITH(phrase_drafter({{1, 2, 3}}, 0), "phrase_drafter: min_match must be >= 1");
    REQUIRE_THROWS_WITH(phrase_drafter({{1, 2}}, 2),
                        "phrase_drafter: every phrase needs more than min_match tokens");
  }
}

TEST_CASE("docs: the checks of docs/writing-a-drafter.md pass on a real engine") {
  my_engine::session s(32, 512);
  session_model target{s};
  const tokens prompt{1, 5, 9, 3};
  specdec::generate_options greedy;
  greedy.max_new_tokens = 64;
  greedy.sampling.temperature = 0;
  const tokens plain = specdec::generate_autoregressive(target, prompt, greedy).tokens;
  REQUIRE(plain.size() == 64);

  SECTION("a phrase the target writes: drafts accepted, output unchanged") {
    phrase_drafter d({tokens(plain.begin() + 10, plain.begin() + 40)});
    CHECK(matches_plain_decoding(target, d, prompt));
    specdec::speculative_decoder decoder(target, d);
    greedy.draft_length = 6;
    const auto fast = decoder.generate(prompt, greedy);
    CHECK(fast.tokens == plain);
    CHECK(fast.stats.accepted_tokens >= 20);
    CHECK(fast.stats.target_calls < plain.size());
  }
  SECTION("a phrase the target never writes: drafts rejected, output unchanged") {
    phrase_drafter d({{plain[0], plain[1], static_cast<specdec::token_id>((plain[2] + 1) % 32),
                       static_cast<specdec::token_id>((plain[3] + 1) % 32)}});
    CHECK(matches_plain_decoding(target, d, prompt));
  }
  SECTION("complete() decodes with the phrases") {
    const auto r = complete(target, prompt, {tokens(plain.begin() + 10, plain.begin() + 40)});
    CHECK(r.tokens.size() == 64);
  }
}
