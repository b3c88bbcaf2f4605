#include <algorithm>
#include <catch2/catch.hpp>
#include <cstddef>
#include <cstdint>
#include <specdec/detail/suffix_automaton.hpp>
#include <vector>

#include "support/lcg.hpp"

using specdec::token_id;
using specdec::detail::suffix_automaton;
using specdec::test::lcg;
using tokens = std::vector<token_id>;

namespace {

// Brute force over h (last position n = h.size() - 1): the longest suffix with an earlier end,
// its latest earlier end and its number of earlier ends.
struct brute_match {
  std::size_t length = 0;
  std::int64_t latest = -1;
  std::size_t count = 0;
};
brute_match brute(const tokens& h) {
  brute_match r;
  const std::size_t n = h.size() - 1;
  for (std::size_t m = 1; m <= n; ++m) {
    std::int64_t latest = -1;
    std::size_t count = 0;
    for (std::size_t e = n; e-- > m - 1;)
      if (std::equal(h.begin() + static_cast<std::ptrdiff_t>(e + 1 - m),
                     h.begin() + static_cast<std::ptrdiff_t>(e + 1),
                     h.end() - static_cast<std::ptrdiff_t>(m))) {
        if (latest < 0) latest = static_cast<std::int64_t>(e);
        ++count;
      }
    if (latest < 0) break;
    r = {m, latest, count};
  }
  return r;
}

}  // namespace

TEST_CASE("suffix_automaton: match, latest end and count agree with brute force") {
  std::size_t checked = 0, long_matches = 0;
  for (std::uint64_t seed = 1; seed <= 60; ++seed) {
    lcg g{seed};
    const std::size_t alphabet = 1 + seed % 6;
    suffix_automaton sa;
    tokens h;
    for (int i = 0; i < 160; ++i) {
      token_id t = static_cast<token_id>(g.below(alphabet));
      if (seed % 5 == 0) t = static_cast<token_id>(i % 2);                          // period 2
      if (seed % 7 == 0 && h.size() > 20 && g.below(3) != 0) t = h[h.size() - 17];  // repeats
      h.push_back(t);
      sa.push(std::span(&h.back(), 1));
      const auto want = brute(h);
      const std::uint32_t q = sa.match();
      INFO("seed " << seed << " position " << i);
      REQUIRE(sa.length(q) == want.length);
      if (want.length > 0) {
        const auto v = sa.stats(q);
        REQUIRE(v.last == static_cast<std::uint32_t>(want.latest));
        REQUIRE(v.count == want.count);
        REQUIRE(sa.first_end(q) <= v.last);
      }
      ++checked;
      long_matches += want.length > 8;
    }
    CHECK(sa.state_count() <= 2 * h.size() + 1);
    CHECK(sa.size() == h.size());
  }
  CHECK(checked == 60 * 160);
  CHECK(long_matches > checked / 10);
}

TEST_CASE("suffix_automaton: transitions and tokens") {
  suffix_automaton sa;
  const tokens h{5, -3, 5, 2147483647, 5, -3};  // any 32-bit value is a symbol
  sa.push(h);
  CHECK(std::equal(h.begin(), h.end(), sa.tokens().begin(), sa.tokens().end()));
  const std::uint32_t five = sa.next(suffix_automaton::root, 5);
  REQUIRE(five != suffix_automaton::none);
  tokens after;
  sa.for_each_child(five, [&](token_id t, std::uint32_t) { after.push_back(t); });
  std::sort(after.begin(), after.end());
  CHECK(after == tokens{-3, 2147483647});
  CHECK(sa.next(five, 7) == suffix_automaton::none);
  CHECK(sa.length(sa.match()) == 2);  // (5, -3) ends at 1 and 5
  CHECK(sa.stats(sa.match()).last == 1);
  sa.clear();
  CHECK(sa.size() == 0);
  CHECK(sa.match() == suffix_automaton::root);
}

TEST_CASE("suffix_automaton: a million copies of one token stay linear") {
  // The suffix-link path is as long as the stream: statistics kept by walking it would take
  // ~5 * 10^11 steps; the link-cut tree keeps the whole run to a fraction of a second.
  suffix_automaton sa;
  const std::size_t n = 1 << 20;
  sa.reserve(n);
  const tokens h(n, 7);
  sa.push(h);
  const std::uint32_t q = sa.match();
  CHECK(sa.length(q) == n - 1);
  CHECK(sa.stats(q).last == n - 2);
  CHECK(sa.stats(q).count == 1);
  CHECK(sa.stats(sa.link(q)).count == 2);
  CHECK(sa.state_count() == n + 1);
}
