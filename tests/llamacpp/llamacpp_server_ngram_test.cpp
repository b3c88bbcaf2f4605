// tests/llamacpp/llamacpp_server_ngram_test.cpp - ngram-specdec's slots
// (examples/llamacpp/server/ngram_slots.hpp), the code llama-server's spec type runs: a slot drafts
// from its own request's text; with the cross-request cache off, no other request's text (nor
// the same slot's previous request's) ever reaches a draft, and with it on it does (the control
// that shows the test can see a leak); the shortest match, the adaptive length and the cap hold;
// bad input is refused.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <numeric>
#include <stdexcept>
#include <vector>

#include "catch_runner.hpp"
#include "ngram_slots.hpp"

using specdec::token_id;
using specdec::llama_server::ngram_slots;
using specdec::llama_server::ngram_slots_options;
using tokens = std::vector<token_id>;

namespace {

// A private text: 64 tokens that occur nowhere else in these tests.
tokens secret() {
  tokens s(64);
  std::iota(s.begin(), s.end(), 1000);
  return s;
}

tokens concat(tokens a, const tokens& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Drafts for `history` (its last token as id_last, as llama-server passes it).
tokens draft(ngram_slots& slots, std::size_t seq, const tokens& history, std::size_t n_max) {
  tokens out;
  slots.draft(seq, std::span(history).first(history.size() - 1), history.back(), n_max, out);
  return out;
}

bool any_of_secret(const tokens& t) {
  const tokens s = secret();
  return std::any_of(t.begin(), t.end(),
                     [&](token_id x) { return std::find(s.begin(), s.end(), x) != s.end(); });
}

// Request A on slot 0 with the secret in its prompt and drafted from (so the slot holds it), then
// a new request on slot 0; returns what slot `probe_seq` drafts, in a new request, for a prompt
// that ends with the secret's first 4 tokens: its continuation is the secret's tail only if some
// draft sees request A's text.
tokens probe(bool shared, std::size_t probe_seq) {
  ngram_slots slots(2, ngram_slots_options{.shared = shared});
  const tokens a = concat(tokens{5, 6, 7}, secret());
  slots.begin(0, a);
  CHECK(!draft(slots, 0, concat(a, tokens{1000, 1001}), 8).empty());  // its own text drafts
  slots.begin(0, tokens{8, 9});  // request A is over
  const tokens b{11, 12, 13, 1000, 1001, 1002, 1003};
  if (probe_seq != 0) slots.begin(probe_seq, b);
  return draft(slots, probe_seq, b, 16);
}

}  // namespace

TEST_CASE("ngram_slots: a slot drafts the continuation of its own longest earlier match") {
  ngram_slots slots(1, {});
  const tokens h{1, 2, 3, 4, 5, 6, 9, 9, 1, 2, 3};
  slots.begin(0, h);
  CHECK(draft(slots, 0, h, 3) == tokens{4, 5, 6});
  CHECK(draft(slots, 0, h, 0).empty());  // n_max = 0: nothing
  CHECK(draft(slots, 0, concat(h, tokens{4}), 8) == tokens{5, 6, 9, 9, 1, 2, 3, 4});
}

TEST_CASE("ngram_slots: without the cross-request cache no request's text reaches another's drafts") {
  SECTION("another slot") { CHECK(!any_of_secret(probe(false, 1))); }
  SECTION("the same slot's next request") { CHECK(!any_of_secret(probe(false, 0))); }
  SECTION("control: with the cache on, the secret's tail is drafted") {
    const tokens s = secret();
    // a match of 4 tokens: 8 drafted at the default adaptive cap (2 x the match)
    CHECK(probe(true, 1) == tokens(s.begin() + 4, s.begin() + 12));
    CHECK(probe(true, 0) == tokens(s.begin() + 4, s.begin() + 12));
  }
}

TEST_CASE("ngram_slots: min_match leaves short matches undrafted") {
  ngram_slots one(1, {.min_match = 1}), three(1, {.min_match = 3});
  const tokens h{1, 2, 3, 7, 8, 2, 3};  // longest earlier match of the end: "2 3" (2 tokens)
  one.begin(0, h);
  three.begin(0, h);
  CHECK(draft(one, 0, h, 4) == tokens{7, 8, 2, 3});
  CHECK(draft(three, 0, h, 4).empty());
}

TEST_CASE("ngram_slots: adaptive caps a draft by the match's length") {
  const tokens h{1, 2, 3, 4, 5, 6, 9, 9, 1, 2, 3};  // the end matches "1 2 3": 3 tokens
  ngram_slots one(1, {.adaptive = 1.0}), half(1, {.adaptive = 0.5});
  one.begin(0, h);
  half.begin(0, h);
  CHECK(draft(one, 0, h, 8) == tokens{4, 5, 6});
  CHECK(draft(half, 0, h, 8) == tokens{4, 5});  // ceil(0.5 x 3)
}

TEST_CASE("ngram_slots: a request too long for the cache's bound is left out of it") {
  ngram_slots slots(1, {.shared = true, .shared_bytes = 4096});
  const tokens small{1, 2, 3, 4, 5, 6, 7, 8};
  tokens large(400);  // 400 tokens: over 4096 bytes at worst
  std::iota(large.begin(), large.end(), 100);
  slots.begin(0, large);
  CHECK(draft(slots, 0, large, 4).empty());  // no repeat; the slot now holds the history
  CHECK_NOTHROW(slots.begin(0, small));  // the long request is not cached, and nothing throws
  CHECK(slots.cache()->document_count() == 0);
  CHECK(draft(slots, 0, small, 4).empty());
  slots.begin(0, tokens{9});
  CHECK(slots.cache()->document_count() == 1);  // the short one is
}

TEST_CASE("ngram_slots: bad input is refused, naming it") {
  CHECK_THROWS_WITH(ngram_slots(1, {.adaptive = -1.0}), Catch::Contains("adaptive"));
  CHECK_THROWS_WITH(ngram_slots(1, {.min_match = 0}), Catch::Contains("min_match"));
  CHECK_THROWS_WITH(ngram_slots(1, {.shared = true, .shared_bytes = 100}),
                    Catch::Contains("max_bytes"));
  ngram_slots slots(2, {});
  tokens out;
  CHECK_THROWS_AS(slots.begin(2, tokens{1}), std::out_of_range);
  CHECK_THROWS_WITH(slots.draft(5, tokens{1}, 2, 4, out), Catch::Contains("seq 5"));
}

int main(int argc, char* argv[]) { return specdec_test::run_catch(argc, argv); }
