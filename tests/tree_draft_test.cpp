#include <catch2/catch.hpp>
#include <specdec/tree/tree_draft.hpp>

#include <algorithm>
#include <vector>

using specdec::candidate_draw;
using specdec::draw_candidates;
using specdec::rng;
using specdec::token_id;

TEST_CASE("draw_candidates: i.i.d. draws are sample() calls in a row") {
  const std::vector<float> q{0.1f, 0.0f, 0.6f, 0.3f};
  rng a(7), b(7);
  std::vector<token_id> out{9, 9};
  std::vector<float> scratch;
  draw_candidates(q, 5, candidate_draw::iid, a, out, scratch);
  REQUIRE(out.size() == 5);
  for (token_id t : out) CHECK(t == specdec::sample(q, b));
  CHECK(std::find(out.begin(), out.end(), token_id{1}) == out.end());
}

TEST_CASE("draw_candidates: without replacement, distinct tokens, at most the support") {
  const std::vector<float> q{0.1f, 0.0f, 0.6f, 0.3f};
  std::vector<token_id> out;
  std::vector<float> scratch;
  for (std::uint64_t seed = 0; seed < 20; ++seed) {
    rng gen(seed);
    draw_candidates(q, 2, candidate_draw::without_replacement, gen, out, scratch);
    REQUIRE(out.size() == 2);
    CHECK(out[0] != out[1]);
    draw_candidates(q, 10, candidate_draw::without_replacement, gen, out, scratch);
    std::vector<token_id> sorted = out;
    std::sort(sorted.begin(), sorted.end());
    CHECK(sorted == std::vector<token_id>{0, 2, 3});
  }
}

TEST_CASE("draw_candidates: deterministic is refused") {
  const std::vector<float> q{1.0f};
  rng gen(0);
  std::vector<token_id> out;
  std::vector<float> scratch;
  REQUIRE_THROWS_WITH(
      draw_candidates(q, 1, candidate_draw::deterministic, gen, out, scratch),
      "draw_candidates: draw must be iid or without_replacement");
}
