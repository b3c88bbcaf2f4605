// tests/support/naive_prompt_lookup.hpp - prompt lookup straight from its definition: rescans the
// whole history on every call. The reference ngram_drafter is checked against (both match
// policies, both search policies, candidates), in tests/ngram_drafter_test.cpp and in
// bench/ngram_replay_bench.cpp.
#pragma once

#include <algorithm>
#include <cstddef>
#include <utility>
#include <vector>

#include <specdec/draft/ngram_drafter.hpp>
#include <specdec/types.hpp>

namespace specdec::test {

struct naive_prompt_lookup {
  using tokens = std::vector<token_id>;

  ngram_options o;
  std::size_t prompt_length = 0;  ///< used under ngram_search_policy::prompt_only

  std::size_t limit(const tokens& h) const {
    return o.search == ngram_search_policy::prompt_only ? std::min(prompt_length, h.size())
                                                        : h.size();
  }
  // Ends e (descending) of earlier occurrences of the m-token suffix with a token after them.
  std::vector<std::size_t> occurrences(const tokens& h, std::size_t m) const {
    std::vector<std::size_t> ends;
    const std::size_t n = h.size(), lim = limit(h);
    if (lim < 2 || m > n) return ends;
    for (std::size_t e = lim - 2 + 1; e-- > 0;) {
      if (e + 1 < m) break;
      if (std::equal(h.begin() + static_cast<std::ptrdiff_t>(e + 1 - m),
                     h.begin() + static_cast<std::ptrdiff_t>(e + 1),
                     h.begin() + static_cast<std::ptrdiff_t>(n - m)))
        ends.push_back(e);
    }
    return ends;
  }
  tokens continuation(const tokens& h, std::size_t e, std::size_t k) const {
    const std::size_t count = std::min(k, limit(h) - 1 - e);
    return tokens(h.begin() + static_cast<std::ptrdiff_t>(e + 1),
                  h.begin() + static_cast<std::ptrdiff_t>(e + 1 + count));
  }
  tokens propose(const tokens& h, std::size_t k) const {
    k = std::min(k, o.max_draft);
    if (k == 0) return {};
    for (std::size_t m = o.max_ngram; m >= o.min_ngram; --m) {
      const auto ends = occurrences(h, m);
      if (ends.empty()) continue;
      std::size_t best = ends.front();
      if (o.match == ngram_match_policy::longest_continuation) {
        std::size_t best_len = 0;
        for (std::size_t e : ends) {  // descending: '>' keeps the latest among equals
          const std::size_t len = std::min(k, limit(h) - 1 - e);
          if (len > best_len) best = e, best_len = len;
        }
      }
      return continuation(h, best, k);
    }
    return {};
  }
  std::vector<tokens> candidates(const tokens& h, std::size_t k, std::size_t n) const {
    std::vector<tokens> out;
    k = std::min(k, o.max_draft);
    if (k == 0 || n == 0) return out;
    for (std::size_t m = o.max_ngram; m >= o.min_ngram; --m) {
      const auto ends = occurrences(h, m);
      for (std::size_t i = 0; i < ends.size() && i < o.max_candidate_scan; ++i) {
        auto c = continuation(h, ends[i], k);
        if (std::find(out.begin(), out.end(), c) != out.end()) continue;
        out.push_back(std::move(c));
        if (out.size() == n) return out;
      }
    }
    return out;
  }
};

}  // namespace specdec::test
