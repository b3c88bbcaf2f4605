#include <algorithm>
#include <catch2/catch.hpp>
#include <cstddef>
#include <cstdint>
#include <specdec/draft/ngram_drafter.hpp>
#include <specdec/math/rng.hpp>
#include <specdec/math/sampling_params.hpp>
#include <specdec/tree/tree_draft.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "support/lcg.hpp"
#include "support/naive_prompt_lookup.hpp"

using specdec::ngram_drafter;
using specdec::ngram_match_policy;
using specdec::ngram_options;
using specdec::ngram_search_policy;
using specdec::token_id;
using specdec::test::lcg;
using specdec::test::naive_prompt_lookup;
using tokens = std::vector<token_id>;

namespace {

// Random tokens over a small alphabet; with `repetitive`, mostly copies of earlier spans.
token_id next_token(lcg& g, const tokens& h, std::size_t alphabet, bool repetitive,
                    std::size_t& copy_from) {
  if (repetitive && copy_from != SIZE_MAX && copy_from < h.size() && g.below(8) != 0)
    return h[copy_from++];
  if (repetitive && !h.empty() && g.below(4) == 0) {
    copy_from = g.below(h.size());
    return h[copy_from++];
  }
  copy_from = SIZE_MAX;
  return static_cast<token_id>(g.below(alphabet));
}

}  // namespace

TEST_CASE("ngram_drafter: models specdec::Drafter") {
  STATIC_REQUIRE(specdec::Drafter<specdec::ngram_drafter>);
  STATIC_REQUIRE(specdec::detail::check_drafter<specdec::ngram_drafter>());
}

TEST_CASE("ngram_drafter: options are validated at construction") {
  SECTION("min_ngram == 0") {
    REQUIRE_THROWS_WITH(ngram_drafter({.min_ngram = 0}),
                        "ngram_options.min_ngram: must be >= 1, got 0");
  }
  SECTION("min_ngram > max_ngram") {
    REQUIRE_THROWS_WITH(ngram_drafter({.min_ngram = 5, .max_ngram = 4}),
                        "ngram_options.min_ngram: must be <= max_ngram (4), got 5");
    REQUIRE_THROWS_AS(ngram_drafter({.min_ngram = 3, .max_ngram = 2}), std::invalid_argument);
  }
  SECTION("max_ngram too large") {
    REQUIRE_THROWS_WITH(ngram_drafter({.max_ngram = 65}),
                        "ngram_options.max_ngram: must be <= 64, got 65");
  }
  SECTION("max_draft == 0") {
    REQUIRE_THROWS_WITH(ngram_drafter({.max_draft = 0}),
                        "ngram_options.max_draft: must be >= 1, got 0");
  }
  SECTION("max_candidate_scan == 0") {
    REQUIRE_THROWS_WITH(ngram_drafter({.max_candidate_scan = 0}),
                        "ngram_options.max_candidate_scan: must be >= 1, got 0");
  }
  SECTION("defaults are valid") {
    const ngram_options o;
    CHECK(o.min_ngram == 1);
    CHECK(o.max_ngram == 0);  // unbounded
    CHECK(o.max_draft == 8);
    CHECK(o.match == ngram_match_policy::most_recent);
    CHECK(o.search == ngram_search_policy::prompt_and_generated);
    CHECK_NOTHROW(o.validate());
  }
}

TEST_CASE("ngram_drafter: edge cases") {
  ngram_drafter d({.min_ngram = 2, .max_ngram = 3, .max_draft = 4});
  SECTION("empty context proposes nothing") { CHECK(d.propose(tokens{}, 4).empty()); }
  SECTION("context shorter than min_ngram proposes nothing") {
    CHECK(d.propose(tokens{7}, 4).empty());
  }
  SECTION("k == 0 proposes nothing, even with a match") {
    CHECK(d.propose(tokens{1, 2, 3, 1, 2}, 0).empty());
    CHECK(d.propose(tokens{1, 2, 3, 1, 2}, 4) == tokens{3, 1, 2});
  }
  SECTION("no earlier occurrence proposes nothing") {
    CHECK(d.propose(tokens{1, 2, 3, 4, 5}, 4).empty());
  }
  SECTION("the only occurrence is the suffix itself: nothing") {
    CHECK(d.propose(tokens{5, 1, 2}, 4).empty());
  }
  SECTION("a match right before the end continues with the tokens that exist") {
    // Suffix (2, 2) also ends at position 1; only token 2 (position 2) follows it.
    CHECK(d.propose(tokens{2, 2, 2}, 4) == tokens{2});
  }
  SECTION("the longest matching n-gram wins over a more recent shorter one") {
    // 3-gram (1,2,3) occurs at 0..2 (followed by 7); 2-gram (2,3) most recently at 5..6 (then 9).
    CHECK(d.propose(tokens{1, 2, 3, 7, 8, 2, 3, 9, 1, 2, 3}, 4) == tokens{7, 8, 2, 3});
  }
  SECTION("k is capped by max_draft") {
    CHECK(d.propose(tokens{1, 2, 3, 4, 5, 6, 7, 8, 1, 2}, 100) == tokens{3, 4, 5, 6});
  }
  SECTION("the Drafter form leaves q without rows") {
    specdec::draft out;
    specdec::rng g(1);
    d.propose(tokens{1, 2, 3, 1, 2}, 4, specdec::sampling_params{}, g, out);
    CHECK(out.tokens == tokens{3, 1, 2});
    CHECK(out.deterministic());
  }
}

TEST_CASE("ngram_drafter: match policies break ties as documented") {
  // (1,2) occurs at 0..1 (then 3,4,5,6,...), at 6..7 (then 9,1,2), and at the end.
  const tokens h{1, 2, 3, 4, 5, 6, 1, 2, 9, 1, 2};
  SECTION("most_recent takes the latest occurrence even if it is cut short") {
    ngram_drafter d({.min_ngram = 2, .max_ngram = 2, .max_draft = 5});
    CHECK(d.propose(h, 5) == tokens{9, 1, 2});
  }
  SECTION("longest_continuation takes the one offering the most tokens up to K") {
    ngram_drafter d({.min_ngram = 2,
                     .max_ngram = 2,
                     .max_draft = 5,
                     .match = ngram_match_policy::longest_continuation});
    CHECK(d.propose(h, 5) == tokens{3, 4, 5, 6, 1});
    // With K = 3 both earlier occurrences offer 3 tokens: the latest wins.
    CHECK(d.propose(h, 3) == tokens{9, 1, 2});
  }
}

TEST_CASE("ngram_drafter: prompt_only searches the prompt as a separate document") {
  ngram_drafter d({.min_ngram = 2, .max_ngram = 2, .search = ngram_search_policy::prompt_only});
  const tokens prompt{1, 2, 3, 4, 9};
  CHECK(d.propose(prompt, 8).empty());
  CHECK(d.prompt_length() == 5);
  d.accept(tokens{1, 2});  // history 1 2 3 4 9 1 2: continuation stops at the prompt end
  CHECK(d.propose(tokens{1, 2, 3, 4, 9, 1, 2}, 8) == tokens{3, 4, 9});
  d.accept(tokens{5, 1, 2});  // a generated (1,2) is not searched
  CHECK(d.propose(tokens{1, 2, 3, 4, 9, 1, 2, 5, 1, 2}, 8) == tokens{3, 4, 9});
  SECTION("set_prompt_length overrides the first-history rule") {
    d.set_prompt_length(3);
    CHECK(d.propose(tokens{1, 2, 3, 4, 9, 1, 2, 5, 1, 2}, 8) == tokens{3});
  }
  SECTION("reset forgets the prompt") {
    d.reset();
    CHECK(d.prompt_length() == 0);
    CHECK(d.propose(tokens{1, 2, 5, 1, 2}, 8) == tokens{5, 1, 2});
  }
}

TEST_CASE("ngram_drafter: candidates are distinct, latest first, longest n-gram first") {
  ngram_drafter d({.min_ngram = 1, .max_ngram = 2, .max_draft = 2});
  // (4,1) ends at 8 and 1 (both followed by 7 7); (1) ends at 11 (5 4), 8, 4 (8 8) and 1.
  const tokens h{4, 1, 7, 7, 1, 8, 8, 4, 1, 7, 7, 1, 5, 4, 1};
  const auto c = d.propose_candidates(h, 2, 10);
  REQUIRE(c.size() >= 3);
  CHECK(c[0] == tokens{7, 7});  // (4,1) at 7..8, the latest 2-gram match
  CHECK(c[1] == tokens{5, 4});  // then 1-gram (1) at 11, then (1) at 4
  CHECK(c[2] == tokens{8, 8});
  CHECK(c.size() == 3);  // (1) at 8 and at 1 repeat "7 7"
  CHECK(d.propose_candidates(h, 2, 1) == std::vector<tokens>{tokens{7, 7}});
  CHECK(d.propose_candidates(h, 0, 3).empty());
  CHECK(d.propose_candidates(h, 2, 0).empty());
}

TEST_CASE("ngram_drafter: unbounded candidates branch inside the draft") {
  ngram_drafter d({.max_ngram = 0});
  // "5 1" was followed by "2 3" and by "2 4": the draft copies the latest ("2 4 5"); "2" is the
  // only follower seen (P = 2/3, the rest of the mass escapes), then 3 and 4 are even (1/4
  // each), so the branch 3 at the second position is worth 2/3 * 1/4 and is taken, continued
  // from its occurrence. The former rule (alternatives after shorter matches only) found no second draft.
  const tokens h{5, 1, 2, 3, 5, 1, 2, 4, 5, 1};
  CHECK(d.propose_candidates(h, 3, 4) == std::vector<tokens>{{2, 4, 5}, {2, 3, 5}});
  CHECK(d.propose_candidates(h, 3, 1) == std::vector<tokens>{{2, 4, 5}});
}

TEST_CASE("ngram_drafter: incremental index agrees with a naive rescan") {
  struct setting {
    std::size_t min_ngram, max_ngram, max_draft;
  };
  // max_ngram = 0: unbounded (the suffix automaton).
  const std::vector<setting> settings{{1, 1, 4},  {1, 3, 8}, {2, 4, 8},  {3, 3, 16}, {2, 6, 5},
                                      {1, 8, 32}, {1, 0, 8}, {2, 0, 40}, {4, 0, 16}};
  const std::vector<std::size_t> ks{0, 1, 3, 8, 40};
  std::uint64_t seed = 1;
  std::size_t calls = 0, non_empty = 0, differs_by_policy = 0, inner_branches = 0;
  for (const auto& s : settings)
    for (const auto match :
         {ngram_match_policy::most_recent, ngram_match_policy::longest_continuation,
          ngram_match_policy::most_frequent})
      for (const auto search :
           {ngram_search_policy::prompt_and_generated, ngram_search_policy::prompt_only})
        for (const std::size_t alphabet : {2u, 3u, 6u, 40u})
          for (const bool repetitive : {false, true}) {
            if (match == ngram_match_policy::most_frequent && s.max_ngram != 0) continue;
            const ngram_options o{.min_ngram = s.min_ngram,
                                  .max_ngram = s.max_ngram,
                                  .max_draft = s.max_draft,
                                  .match = match,
                                  .search = search,
                                  .max_candidate_scan = 5,
                                  .adaptive_factor = s.max_ngram == 0 && seed % 3 == 0 ? 1.5 : 0.0};
            INFO("min " << o.min_ngram << " max " << o.max_ngram << " cap " << o.max_draft
                        << " match " << int(match) << " search " << int(search) << " alphabet "
                        << alphabet << " repetitive " << repetitive);
            ngram_drafter d(o);
            naive_prompt_lookup ref{o};
            lcg g{seed++};
            tokens h;
            bool fresh = true;        // the next history starts a new sequence
            bool explicit_p = false;  // set_prompt_length was called since the last reset
            std::size_t copy_from = SIZE_MAX;
            for (int step = 0; step < 120; ++step) {
              const std::size_t event = g.below(40);
              std::size_t max_size = SIZE_MAX;
              if (event == 0) {  // explicit reset
                d.reset();
                h.clear();
                fresh = true;
                explicit_p = false;
              } else if (event == 1 && h.size() > 3) {
                // The history shrinks without reset (a new request): detected, index rebuilt.
                max_size = h.size() - 1;
                h.resize(g.below(h.size()));
                fresh = true;
              } else if (event == 2 && search == ngram_search_policy::prompt_only) {
                ref.prompt_length = g.below(h.size() + 4);
                d.set_prompt_length(ref.prompt_length);
                explicit_p = true;
              }
              // Append a chunk of varying size (a prompt is longer), via accept or directly.
              const std::size_t chunk = fresh ? g.below(30) : g.below(12);
              tokens c;
              for (std::size_t i = 0; i < chunk && h.size() < max_size; ++i) {
                c.push_back(next_token(g, h, alphabet, repetitive, copy_from));
                h.push_back(c.back());
              }
              if (!fresh && g.below(2) == 0) d.accept(c);
              if (fresh && !explicit_p) ref.prompt_length = h.size();
              const std::size_t k = ks[g.below(ks.size())];
              INFO("step " << step << " size " << h.size() << " k " << k);
              if (g.below(4) == 0) {
                const std::size_t n = 1 + g.below(4);
                const auto got = d.propose_candidates(h, k, n);
                REQUIRE(got == ref.candidates(h, k, n));
                // A second candidate sharing the first's first token branched inside it.
                inner_branches += got.size() > 1 && got[1].front() == got[0].front();
              } else {
                const tokens got = d.propose(h, k);
                REQUIRE(got == ref.propose(h, k));
                ++calls;
                non_empty += !got.empty();
                auto other = ref;
                other.o.match = match == ngram_match_policy::most_recent
                                    ? ngram_match_policy::longest_continuation
                                    : ngram_match_policy::most_recent;
                if (other.o.max_ngram != 0) other.o.adaptive_factor = 0;
                differs_by_policy += other.propose(h, k) != got;
              }
              fresh = false;
            }
          }
  // The streams exercise matches, misses and both tie-break rules.
  CHECK(non_empty > calls / 3);
  CHECK(non_empty < calls);
  CHECK(differs_by_policy > calls / 50);
  CHECK(inner_branches > 10);
}

TEST_CASE("ngram_drafter: a long repetitive stream stays exact") {
  ngram_drafter d({.min_ngram = 2, .max_ngram = 5, .max_draft = 16});
  naive_prompt_lookup ref{d.options()};
  lcg g{99};
  tokens h;
  std::size_t copy_from = SIZE_MAX;
  for (int i = 0; i < 3000; ++i) h.push_back(next_token(g, h, 50, true, copy_from));
  ref.prompt_length = h.size();
  REQUIRE(d.propose(h, 16) == ref.propose(h, 16));
  for (int step = 0; step < 300; ++step) {
    tokens c;
    for (std::size_t i = 0, n = 1 + g.below(6); i < n; ++i) {
      c.push_back(next_token(g, h, 50, true, copy_from));
      h.push_back(c.back());
    }
    d.accept(c);
    REQUIRE(d.propose(h, 16) == ref.propose(h, 16));
  }
  CHECK(d.size() == h.size());
}

TEST_CASE("ngram_drafter: max_ngram = 0 matches the longest suffix of any length") {
  SECTION("options") {
    CHECK_NOTHROW(ngram_drafter({.min_ngram = 9, .max_ngram = 0}));
    REQUIRE_THROWS_WITH(ngram_drafter({.max_ngram = 4, .match = ngram_match_policy::most_frequent}),
                        "ngram_options.match: most_frequent needs max_ngram = 0, got 4");
    REQUIRE_THROWS_WITH(ngram_drafter({.max_ngram = 4, .adaptive_factor = 2}),
                        "ngram_options.adaptive_factor: needs max_ngram = 0, got 4");
    REQUIRE_THROWS_WITH(ngram_drafter({.max_ngram = 0, .adaptive_factor = -1}),
                        "ngram_options.adaptive_factor: must be in [0, 1e6], got -1.000000");
    CHECK(ngram_drafter({.max_ngram = 0}).options().max_ngram == 0);
  }
  SECTION("a 6-token match beats a more recent 4-token one") {
    ngram_drafter d({.min_ngram = 2, .max_ngram = 0, .max_draft = 3});
    const tokens h{1, 2, 3, 4, 5, 6, 7, 8, 0, 3, 4, 5, 6, 9, 0, 1, 2, 3, 4, 5, 6};
    CHECK(d.propose(h, 3) == tokens{7, 8, 0});
    ngram_drafter bounded({.min_ngram = 2, .max_ngram = 4, .max_draft = 3});
    CHECK(bounded.propose(h, 3) == tokens{9, 0, 1});
  }
  SECTION("most_frequent follows the majority, adaptive length follows the match") {
    // The match (0, 1, 2) is followed by 3 twice, then by 4 once (the latest).
    const tokens h{0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 4, 0, 1, 2};
    ngram_drafter recent({.max_ngram = 0, .max_draft = 4});
    CHECK(recent.propose(h, 4) == tokens{4, 0, 1, 2});
    ngram_drafter frequent(
        {.max_ngram = 0, .max_draft = 4, .match = ngram_match_policy::most_frequent});
    CHECK(frequent.propose(h, 4) == tokens{3, 0, 1, 2});
    ngram_drafter adaptive({.max_ngram = 0, .max_draft = 8, .adaptive_factor = 0.5});
    CHECK(adaptive.propose(h, 8).size() == 2);  // match (0, 1, 2): 3 tokens * 0.5, rounded up
  }
  SECTION("a match shorter than min_ngram proposes nothing") {
    ngram_drafter d({.min_ngram = 3, .max_ngram = 0});
    CHECK(d.propose(tokens{1, 2, 9, 1, 2}, 4).empty());
    CHECK(d.propose(tokens{1, 2, 9, 1, 2, 9, 1}, 4) == tokens{2, 9, 1});
  }
}

TEST_CASE("ngram_drafter: unbounded lookup on adversarial streams agrees with a naive rescan") {
  struct stream {
    const char* name;
    std::size_t length;
  };
  for (const auto match :
       {ngram_match_policy::most_recent, ngram_match_policy::longest_continuation,
        ngram_match_policy::most_frequent}) {
    const ngram_options o{.min_ngram = 2, .max_ngram = 0, .max_draft = 16, .match = match};
    for (const stream s : {stream{"one token", 400}, stream{"period 2", 400},
                           stream{"long repeats", 1500}, stream{"period 7 with noise", 800}}) {
      INFO(s.name << " match " << int(match));
      lcg g{7};
      tokens h;
      const tokens block = [&] {
        tokens b;
        for (int i = 0; i < 300; ++i) b.push_back(static_cast<token_id>(g.below(1000)));
        return b;
      }();
      auto token_at = [&](std::size_t i) -> token_id {
        const std::string name = s.name;
        if (name == "one token") return 3;
        if (name == "period 2") return static_cast<token_id>(i % 2);
        if (name == "long repeats") return g.below(50) == 0 ? 5000 : block[i % block.size()];
        return g.below(10) == 0 ? 6000 : static_cast<token_id>(i % 7);
      };
      ngram_drafter d(o);
      naive_prompt_lookup ref{o};
      for (std::size_t i = 0; i < 20; ++i) h.push_back(token_at(h.size()));
      ref.prompt_length = h.size();
      REQUIRE(d.propose(h, 16) == ref.propose(h, 16));
      while (h.size() < s.length) {
        tokens c;
        for (std::size_t j = 0, n = 1 + g.below(9); j < n; ++j) c.push_back(token_at(h.size() + j));
        h.insert(h.end(), c.begin(), c.end());
        d.accept(c);
        INFO("size " << h.size());
        REQUIRE(d.propose(h, 16) == ref.propose(h, 16));
        if (h.size() % 10 < 3) REQUIRE(d.propose_candidates(h, 8, 4) == ref.candidates(h, 8, 4));
      }
    }
  }
}

TEST_CASE("ngram_drafter: unbounded lookup on a 1M-token stream") {
  SECTION("one repeated token") {
    ngram_drafter d({.max_ngram = 0, .max_draft = 64});
    const tokens h(std::size_t{1} << 20, 11);
    // The longest match (n - 1 tokens) has one earlier occurrence, ending one token before.
    CHECK(d.propose(h, 64) == tokens{11});
    CHECK(d.propose_candidates(h, 64, 4) == std::vector<tokens>{tokens{11}});
  }
  SECTION("random copies, checked against the naive rule at sampled positions") {
    lcg g{2024};
    tokens h;
    std::size_t copy_from = SIZE_MAX;
    while (h.size() < (std::size_t{1} << 20)) h.push_back(next_token(g, h, 32000, true, copy_from));
    ngram_drafter d({.max_ngram = 0, .max_draft = 32});
    naive_prompt_lookup ref{d.options()};
    for (const std::size_t n : {std::size_t{1} << 18, std::size_t{700001}, h.size()}) {
      const tokens prefix(h.begin(), h.begin() + static_cast<std::ptrdiff_t>(n));
      ref.prompt_length = n;
      REQUIRE(d.propose(prefix, 32) == ref.propose(prefix, 32));
      REQUIRE(d.propose_candidates(prefix, 8, 4) == ref.candidates(prefix, 8, 4));
    }
    CHECK(d.size() == h.size());
  }
}

TEST_CASE("ngram_drafter: tokens outside any vocabulary are indexed as symbols") {
  // The drafter never judges token ids: negative or huge ids in the history are matched like any
  // other (the decoder refuses a proposed token outside the target's vocabulary).
  for (const std::size_t max_ngram : {std::size_t{0}, std::size_t{4}}) {
    ngram_drafter d({.max_ngram = max_ngram});
    const tokens h{-1, 2147483647, -2147483647 - 1, 9, -1, 2147483647};
    CHECK(d.propose(h, 8) == tokens{-2147483647 - 1, 9, -1, 2147483647});
  }
}

TEST_CASE("ngram_drafter: a history rewritten in the middle without reset") {
  // Documented: the O(1) spot check (size, first and last indexed token) does not see a rewrite
  // in the middle; the drafter keeps drafting from the tokens it indexed (still valid drafts,
  // only worse guesses) and matches the new history after reset().
  for (const std::size_t max_ngram : {std::size_t{0}, std::size_t{4}}) {
    const ngram_options o{.max_ngram = max_ngram};
    ngram_drafter d(o);
    naive_prompt_lookup ref{o};
    tokens h{1, 2, 3, 4, 5, 6, 1, 2};
    CHECK(d.propose(h, 8) == tokens{3, 4, 5, 6, 1, 2});
    tokens rewritten = h;
    rewritten[2] = 30;
    rewritten.push_back(30);
    h.push_back(30);  // what the drafter holds: the old middle, the new tail
    ref.prompt_length = h.size();
    CHECK(d.propose(rewritten, 8) == ref.propose(h, 8));
    d.reset();
    ref.prompt_length = rewritten.size();
    CHECK(d.propose(rewritten, 8) == ref.propose(rewritten, 8));
    CHECK(d.size() == rewritten.size());
  }
}

TEST_CASE("ngram_drafter: a context beyond the index's limit is refused before any allocation") {
  // 2^29 tokens for the unbounded index (32-bit state numbers and slots), 2^32 - 3 for the
  // bounded one: reserve() says so without allocating, and the drafter stays usable.
  ngram_drafter unbounded;
  const std::size_t limit = specdec::detail::suffix_automaton::max_tokens;
  CHECK_THROWS_WITH(unbounded.reserve(limit + 1),
                    "ngram_drafter: history longer than 2^29 tokens (max_ngram = 0)");
  ngram_drafter bounded({.min_ngram = 2, .max_ngram = 4});
  CHECK_THROWS_AS(bounded.reserve(std::size_t{1} << 32), std::length_error);
  const tokens h = {1, 2, 3, 1, 2};
  CHECK(unbounded.propose(h, 4) == tokens{3, 1, 2});
  CHECK(bounded.propose(h, 4) == tokens{3, 1, 2});
}

TEST_CASE("ngram_drafter: a tree keeps to the branching factors, node by node") {
  // "1 2" was followed by "3 1 2 4", "4 1 2 3" and "3 1 2 3": two candidates share their first
  // token, so a trie of them gives that node two children where branching[1] allows one.
  const tokens h{1, 2, 3, 1, 2, 4, 1, 2, 3, 1, 2, 3, 1, 2};
  specdec::rng g(1);
  specdec::tree_draft out;
  const auto check = [&](ngram_drafter& d, const tokens& history,
                         const std::vector<std::size_t>& branching) {
    d.propose_tree(history, branching, specdec::sampling_params{}, g,
                   specdec::candidate_draw::iid, out);
    const specdec::token_tree& t = out.tree;
    CHECK(t.token(0) == history.back());
    CHECK(t.max_depth() <= branching.size());
    CHECK(out.draw == specdec::candidate_draw::deterministic);
    for (std::size_t i = 0; i < t.size(); ++i) {
      const auto depth = static_cast<std::size_t>(t.depth(i));
      INFO("node " << i << " at depth " << depth);
      if (depth == branching.size()) CHECK(t.is_leaf(i));
      else CHECK(t.num_children(i) <= branching[depth]);
    }
    return t.size();
  };
  SECTION("the example, both indexes") {
    for (const std::size_t max_ngram : {std::size_t{0}, std::size_t{3}}) {
      ngram_drafter d({.min_ngram = 1, .max_ngram = max_ngram});
      INFO("max_ngram " << max_ngram);
      CHECK(check(d, h, {3, 1, 1, 1}) > 1);
      CHECK(check(d, h, {3, 2, 1}) > 1);
      CHECK(check(d, h, {1, 1}) == 3);
    }
  }
  SECTION("random repetitive streams") {
    lcg gen{11};
    for (int round = 0; round < 40; ++round) {
      tokens stream;
      std::size_t copy_from = SIZE_MAX;
      for (int i = 0; i < 200; ++i) stream.push_back(next_token(gen, stream, 4, true, copy_from));
      ngram_drafter d({.min_ngram = 1, .max_ngram = round % 2 == 0 ? 0u : 4u});
      check(d, stream, {4, 1, 2, 1});
      check(d, stream, {2, 2});
    }
  }
}
