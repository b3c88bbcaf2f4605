// tests/support/naive_prompt_lookup.hpp - prompt lookup straight from its definition: rescans the
// whole history on every call. The reference ngram_drafter is checked against (both match
// policies, both search policies, candidates), in tests/ngram_drafter_test.cpp and in
// bench/ngram_replay_bench.cpp.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <specdec/draft/ngram_drafter.hpp>
#include <specdec/types.hpp>
#include <utility>
#include <vector>

namespace specdec::test {

struct naive_prompt_lookup {
  using tokens = std::vector<token_id>;

  ngram_options o;
  std::size_t prompt_length = 0;  ///< used under ngram_search_policy::prompt_only
  std::vector<tokens> documents{};  ///< the cross-request cache's documents, oldest first

  // The cache: the longest suffix of h with an occurrence in a document followed by a token of
  // that document; its latest occurrence (newest document, then largest end). (0, {}) if none.
  std::pair<std::size_t, tokens> cache_match(const tokens& h, std::size_t k) const {
    for (std::size_t m = h.size(); m > 0; --m)
      for (std::size_t d = documents.size(); d-- > 0;) {
        const tokens& doc = documents[d];
        for (std::size_t e = doc.size() >= 2 ? doc.size() - 1 : 0; e-- > 0;) {
          if (e + 1 < m) break;
          if (std::equal(doc.begin() + static_cast<std::ptrdiff_t>(e + 1 - m),
                         doc.begin() + static_cast<std::ptrdiff_t>(e + 1),
                         h.end() - static_cast<std::ptrdiff_t>(m)))
            return {m, tokens(doc.begin() + static_cast<std::ptrdiff_t>(e + 1),
                              doc.begin() + static_cast<std::ptrdiff_t>(
                                                std::min(doc.size(), e + 1 + k)))};
        }
      }
    return {0, {}};
  }
  // The cache's draft (adaptive cap applied) when its match is >= min_ngram; `wins` when that
  // match is longer than the longest earlier match in h.
  tokens cache_draft(const tokens& h, std::size_t k, bool& wins) const {
    wins = false;
    if (documents.empty()) return {};
    auto [m, draft] = cache_match(h, k);
    if (m < o.min_ngram || m == 0) return {};
    if (o.adaptive_factor > 0)
      draft.resize(std::min(
          draft.size(), static_cast<std::size_t>(std::ceil(o.adaptive_factor * double(m)))));
    wins = m > longest(h);
    return draft;
  }

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
  // Per earlier end e <= limit - 2: the length of the longest common suffix of h[0..e] and h.
  std::vector<std::size_t> common_suffix(const tokens& h) const {
    const std::size_t n = h.size(), lim = limit(h);
    std::vector<std::size_t> l(lim >= 2 ? lim - 1 : 0, 0);
    for (std::size_t e = 0; e < l.size(); ++e)
      while (l[e] <= e && h[e - l[e]] == h[n - 1 - l[e]]) ++l[e];
    return l;
  }
  // max_ngram = 0 (unbounded): the longest length that has an earlier occurrence.
  std::size_t longest(const tokens& h) const {
    if (o.max_ngram != 0) return o.max_ngram;
    const auto l = common_suffix(h);
    return l.empty() ? 0 : *std::max_element(l.begin(), l.end());
  }

  // Occurrences of w (ends j <= limit - 2) grouped by the token after them: the most frequent
  // (ties: the latest), or -1 when w has none.
  std::int64_t most_frequent_next(const tokens& h, const tokens& w) const {
    const std::size_t lim = limit(h);
    std::vector<std::pair<token_id, std::pair<std::size_t, std::size_t>>> groups;
    for (std::size_t j = w.size() - 1; j + 2 <= lim; ++j) {
      if (!std::equal(w.begin(), w.end(),
                      h.begin() + static_cast<std::ptrdiff_t>(j + 1 - w.size())))
        continue;
      auto it = std::find_if(groups.begin(), groups.end(),
                             [&](const auto& g) { return g.first == h[j + 1]; });
      if (it == groups.end())
        groups.push_back({h[j + 1], {1, j}});
      else
        ++it->second.first, it->second.second = j;
    }
    if (groups.empty()) return -1;
    const auto best =
        std::min_element(groups.begin(), groups.end(), [](const auto& a, const auto& b) {
          return a.second.first != b.second.first ? a.second.first > b.second.first
                                                  : a.second.second > b.second.second;
        });
    return best->first;
  }

  tokens propose(const tokens& h, std::size_t k) const {
    k = std::min(k, o.max_draft);
    if (k == 0) return {};
    if (!documents.empty()) {
      bool wins = false;
      tokens c = cache_draft(h, k, wins);
      if (wins) return c;
      auto own = *this;
      own.documents.clear();
      return own.propose(h, k);
    }
    if (o.max_ngram == 0 &&
        (o.adaptive_factor > 0 || o.match == ngram_match_policy::most_frequent)) {
      const std::size_t m = longest(h);
      if (m < o.min_ngram || m == 0) return {};
      if (o.adaptive_factor > 0)
        k = std::min(k, static_cast<std::size_t>(std::ceil(o.adaptive_factor * double(m))));
      if (o.match != ngram_match_policy::most_frequent) {
        auto plain = *this;
        plain.o.adaptive_factor = 0;
        return plain.propose(h, k);
      }
      tokens w(h.end() - static_cast<std::ptrdiff_t>(m), h.end()), out;
      while (out.size() < k) {
        const std::int64_t next = most_frequent_next(h, w);
        if (next < 0) break;
        out.push_back(static_cast<token_id>(next));
        w.push_back(static_cast<token_id>(next));
      }
      return out;
    }
    for (std::size_t m = longest(h); m >= o.min_ngram && m > 0; --m) {
      const auto ends = occurrences(h, m);
      if (ends.empty()) continue;
      std::size_t best = ends.front();
      if (o.match == ngram_match_policy::longest_continuation && o.max_ngram == 0) {
        // Unbounded: the latest if it offers k tokens, else the earliest (it offers the most).
        if (limit(h) - 1 - best < k) best = ends.back();
      } else if (o.match == ngram_match_policy::longest_continuation) {
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
    if (o.max_ngram == 0 && !documents.empty()) {
      // Own candidates, then the cache's draft first when it wins, else second.
      auto own = *this;
      own.documents.clear();
      out = own.candidates_unbounded(h, k, n);
      bool wins = false;
      tokens c = cache_draft(h, k, wins);
      if (c.empty()) return out;
      std::erase(out, c);
      out.insert(out.begin() + (wins || out.empty() ? 0 : 1), c);
      if (out.size() > n) out.resize(n);
      return out;
    }
    if (o.max_ngram == 0) return candidates_unbounded(h, k, n);
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
  // The next-token distribution after x (= h + a hypothetical draft prefix) as candidates use it:
  // j ranges over the ends j <= limit - 2 in h, cs(j) = the common suffix length of h[0..j] and
  // x; a context is "the ends with cs(j) >= v" for a value v >= min_ngram taken by cs; the
  // largest 4 such v, largest first, are blended, stopping before the first context with more
  // than 64 ends (PPM, escape C, no exclusion): a context with T
  // ends followed by q distinct tokens gives token c weight * count(c) / (T + q), then weight
  // *= q / (T + q). at: 1 + the latest end followed by c in the first context that has c.
  struct prediction {
    token_id token;
    double p;
    std::size_t at;
  };
  std::vector<prediction> predict(const tokens& h, const tokens& x) const {
    std::vector<prediction> out;
    const std::size_t lim = limit(h);
    if (lim < 2) return out;
    std::vector<std::size_t> cs(lim - 1, 0);
    for (std::size_t j = 0; j < cs.size(); ++j)
      while (cs[j] <= j && cs[j] < x.size() && h[j - cs[j]] == x[x.size() - 1 - cs[j]]) ++cs[j];
    std::vector<std::size_t> values;
    for (const std::size_t v : cs)
      if (v >= o.min_ngram && v > 0) values.push_back(v);
    std::sort(values.rbegin(), values.rend());
    values.erase(std::unique(values.begin(), values.end()), values.end());
    if (values.size() > 4) values.resize(4);
    double weight = 1;
    for (const std::size_t v : values) {
      std::vector<prediction> ctx;  // per token: count in p, latest end + 1 in at
      std::size_t total = 0;
      for (std::size_t j = 0; j < cs.size(); ++j)
        if (cs[j] >= v) ++total;
      if (total > 64) break;
      for (std::size_t j = 0; j < cs.size(); ++j) {
        if (cs[j] < v) continue;
        auto it = std::find_if(ctx.begin(), ctx.end(),
                               [&](const prediction& c) { return c.token == h[j + 1]; });
        if (it == ctx.end())
          ctx.push_back({h[j + 1], 1, j + 1});
        else
          it->p += 1, it->at = j + 1;
      }
      const double denom = double(total) + double(ctx.size());
      for (const prediction& c : ctx) {
        const double p = weight * c.p / denom;
        auto it = std::find_if(out.begin(), out.end(),
                               [&](const prediction& e) { return e.token == c.token; });
        if (it == out.end())
          out.push_back({c.token, p, c.at});
        else
          it->p = it->p + p;
      }
      weight *= double(ctx.size()) / denom;
    }
    return out;
  }

  // Unbounded: propose() first (draft 0); then, while fewer than n, the best untaken branch. A
  // branch (i, d, x) is a token x predicted after h + draft_i[0..d) other than draft_i[d], worth
  // reach(i, d) * P(x); reach(0, 0) = 1, reach(i, d + 1) = reach(i, d) * P(draft_i[d]), and a
  // draft made from branch b starts with reach b's value at position d + 1 (positions before
  // that belong to the draft it came from). Taking b: draft_i[0..d) + the text from x's `at`,
  // at most K' - d tokens (K' = K after the adaptive cap). Best: highest value, then smaller
  // d, then larger at, then smaller i. Positions with reach 0 or without a prediction stop a
  // draft's branches.
  std::vector<tokens> candidates_unbounded(const tokens& h, std::size_t k, std::size_t n) const {
    std::vector<tokens> out;
    auto first = propose(h, k);
    if (first.empty()) return out;
    if (o.adaptive_factor > 0)
      k = std::min(k, static_cast<std::size_t>(std::ceil(o.adaptive_factor * double(longest(h)))));
    out.push_back(std::move(first));
    struct branch {
      double value;
      std::size_t draft, depth;
      token_id token;
      std::size_t at;
    };
    std::vector<branch> open;
    auto grow = [&](std::size_t i, std::size_t from, double reach) {
      for (std::size_t d = from; d < out[i].size() && reach > 0; ++d) {
        tokens x = h;
        x.insert(x.end(), out[i].begin(), out[i].begin() + static_cast<std::ptrdiff_t>(d));
        const auto predicted = predict(h, x);
        if (predicted.empty()) return;
        double own = 0;
        for (const prediction& p : predicted) {
          if (p.token == out[i][d])
            own = p.p;
          else
            open.push_back({reach * p.p, i, d, p.token, p.at});
        }
        reach *= own;
      }
    };
    grow(0, 0, 1.0);
    while (out.size() < n && !open.empty()) {
      const auto best =
          std::min_element(open.begin(), open.end(), [](const branch& a, const branch& b) {
            if (a.value != b.value) return a.value > b.value;
            if (a.depth != b.depth) return a.depth < b.depth;
            if (a.at != b.at) return a.at > b.at;
            return a.draft < b.draft;
          });
      const branch b = *best;
      open.erase(best);
      tokens c(out[b.draft].begin(), out[b.draft].begin() + static_cast<std::ptrdiff_t>(b.depth));
      const tokens rest = continuation(h, b.at - 1, k - b.depth);
      c.insert(c.end(), rest.begin(), rest.end());
      out.push_back(std::move(c));
      grow(out.size() - 1, b.depth + 1, b.value);
    }
    return out;
  }
};

}  // namespace specdec::test
