// specdec/detail/document_automaton.hpp - a suffix automaton over a set of documents, built once
// and then read-only: the index behind specdec::ngram_cache (earlier requests' outputs).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "specdec/types.hpp"

namespace specdec::detail {

/**
 * The generalized suffix automaton of documents d_0 .. d_{m-1} (oldest first), stored as flat
 * arrays once built: every substring of any document is a path from the root, and no path
 * crosses from one document into another. Tokens are opaque 32-bit symbols.
 *
 * Positions are global: document i occupies [start(i), end(i)) of `tokens()`, so a newer
 * document has larger positions. Per state, `latest_end(s)` is the largest end position e of
 * its strings with a token after it in the same document (none if every end is a document's
 * last token).
 *
 * Build: O(total tokens) expected (online construction with a transient hash table, then the
 * transitions sorted per state). Reads: `next` is a binary search over the state's transitions
 * (O(log out-degree)), everything else O(1). All reads are const and touch immutable arrays, so
 * any number of threads may read one automaton concurrently.
 * Memory: 4 bytes per token, 16 per state, 8 per transition, 4 per document; at most 2n states
 * and, observed, under 3n transitions, i.e. at most about 60 bytes per token (bytes_bound()).
 */
class document_automaton {
 public:
  static constexpr std::uint32_t none = std::numeric_limits<std::uint32_t>::max();
  static constexpr std::uint32_t root = 0;

  /// The empty automaton (the root alone).
  document_automaton() { build({}); }

  /// Builds the automaton of `documents`, oldest first. Total length below 2^31 tokens.
  explicit document_automaton(std::span<const std::span<const token_id>> documents) {
    build(documents);
  }

  /// Upper bound of memory_bytes() for documents of `tokens` tokens in total in `documents`
  /// documents (2n + 1 states, 3n transitions).
  static constexpr std::size_t bytes_bound(std::size_t tokens, std::size_t documents) noexcept {
    return sizeof(document_automaton) + 4 * tokens + 16 * (2 * tokens + 2) + 8 * 3 * tokens +
           4 * documents;
  }

  std::size_t size() const noexcept { return tokens_.size(); }
  std::size_t document_count() const noexcept { return ends_.size(); }
  std::span<const token_id> tokens() const noexcept { return tokens_; }
  /// Document i (0 = oldest).
  std::span<const token_id> document(std::size_t i) const noexcept {
    const std::size_t begin = i == 0 ? 0 : ends_[i - 1];
    return std::span<const token_id>(tokens_).subspan(begin, ends_[i] - begin);
  }
  std::size_t state_count() const noexcept { return length_.size(); }
  std::size_t transition_count() const noexcept { return edge_token_.size(); }
  /// Bytes held by the arrays (their capacity) and the object.
  std::size_t memory_bytes() const noexcept {
    return sizeof(*this) + 4 * (tokens_.capacity() + length_.capacity() + link_.capacity() +
                                latest_.capacity() + edge_begin_.capacity() +
                                edge_token_.capacity() + edge_target_.capacity() +
                                ends_.capacity());
  }

  std::size_t length(std::uint32_t s) const noexcept { return length_[s]; }
  std::uint32_t link(std::uint32_t s) const noexcept { return link_[s]; }
  std::uint32_t latest_end(std::uint32_t s) const noexcept { return latest_[s]; }

  /// The state reached from s by t, or none. O(log out-degree).
  std::uint32_t next(std::uint32_t s, token_id t) const noexcept {
    const auto first = edge_token_.begin() + edge_begin_[s];
    const auto last = edge_token_.begin() + edge_begin_[s + 1];
    const auto it = std::lower_bound(first, last, t);
    if (it == last || *it != t) return none;
    return edge_target_[static_cast<std::size_t>(it - edge_token_.begin())];
  }

  /// Up to k tokens after global position e, inside e's document.
  std::span<const token_id> continuation(std::uint32_t e, std::size_t k) const noexcept {
    const std::size_t end = *std::upper_bound(ends_.begin(), ends_.end(), e);
    return std::span<const token_id>(tokens_).subspan(e + 1, std::min(k, end - e - 1));
  }

 private:
  // Construction-time transitions: per-state lists found through an open-addressing table.
  struct builder {
    struct edge {
      std::uint32_t token, target, next;
    };
    struct slot {
      std::uint32_t from, token, edge;  // from = none: empty
    };
    std::vector<std::uint32_t> first_edge;
    std::vector<edge> edges;
    std::vector<slot> slots = std::vector<slot>(64, slot{none, 0, 0});

    static std::size_t hash(std::uint32_t from, std::uint32_t token) noexcept {
      std::uint64_t h = (static_cast<std::uint64_t>(from) << 32 | token) * 0x9E3779B97F4A7C15ULL;
      h ^= h >> 29;
      return static_cast<std::size_t>(h * 0xBF58476D1CE4E5B9ULL >> 17);
    }
    std::uint32_t* find(std::uint32_t from, std::uint32_t token) noexcept {
      const std::size_t mask = slots.size() - 1;
      for (std::size_t i = hash(from, token) & mask;; i = (i + 1) & mask) {
        const slot& s = slots[i];
        if (s.from == none) return nullptr;
        if (s.from == from && s.token == token) return &edges[s.edge].target;
      }
    }
    void place(const slot& s) noexcept {
      const std::size_t mask = slots.size() - 1;
      std::size_t i = hash(s.from, s.token) & mask;
      while (slots[i].from != none) i = (i + 1) & mask;
      slots[i] = s;
    }
    void add(std::uint32_t from, std::uint32_t token, std::uint32_t target) {
      if (2 * (edges.size() + 1) > slots.size()) {
        std::vector<slot> old(slots.size() * 2, slot{none, 0, 0});
        old.swap(slots);
        for (const slot& s : old)
          if (s.from != none) place(s);
      }
      const auto e = static_cast<std::uint32_t>(edges.size());
      edges.push_back(edge{token, target, first_edge[from]});
      first_edge[from] = e;
      place(slot{from, token, e});
    }
  };

  std::uint32_t new_state(builder& b, std::size_t length, std::uint32_t link) {
    length_.push_back(static_cast<std::uint32_t>(length));
    link_.push_back(link);
    b.first_edge.push_back(none);
    return static_cast<std::uint32_t>(length_.size() - 1);
  }

  std::uint32_t clone_of(builder& b, std::uint32_t q, std::size_t length) {
    const std::uint32_t clone = new_state(b, length, link_[q]);
    for (std::uint32_t e = b.first_edge[q]; e != none; e = b.edges[e].next)
      b.add(clone, b.edges[e].token, b.edges[e].target);
    link_[q] = clone;
    return clone;
  }

  // Redirects p, link(p), ... from q to clone while they lead to q by c.
  void redirect(builder& b, std::uint32_t p, std::uint32_t c, std::uint32_t q,
                std::uint32_t clone) {
    for (; p != none; p = link_[p]) {
      std::uint32_t* target = b.find(p, c);
      if (target == nullptr || *target != q) break;
      *target = clone;
    }
  }

  // The online construction generalized to several documents (each starts again at the root).
  std::uint32_t extend(builder& b, std::uint32_t last, std::uint32_t c) {
    if (const std::uint32_t* existing = b.find(last, c)) {
      const std::uint32_t q = *existing;
      if (length_[last] + 1 == length_[q]) return q;
      const std::uint32_t clone = clone_of(b, q, length_[last] + 1);
      redirect(b, last, c, q, clone);
      return clone;
    }
    const std::uint32_t cur = new_state(b, length_[last] + 1, root);
    std::uint32_t p = last;
    for (; p != none && b.find(p, c) == nullptr; p = link_[p]) b.add(p, c, cur);
    if (p == none) return cur;
    const std::uint32_t q = *b.find(p, c);
    if (length_[p] + 1 == length_[q]) {
      link_[cur] = q;
      return cur;
    }
    const std::uint32_t clone = clone_of(b, q, length_[p] + 1);
    redirect(b, p, c, q, clone);
    link_[cur] = clone;
    return cur;
  }

  void build(std::span<const std::span<const token_id>> documents) {
    builder b;
    new_state(b, 0, none);
    std::vector<std::uint32_t> state_at;  // the state of each position's document prefix
    for (const auto& d : documents) {
      std::uint32_t last = root;
      for (const token_id t : d) {
        last = extend(b, last, static_cast<std::uint32_t>(t));
        tokens_.push_back(t);
        state_at.push_back(last);
      }
      ends_.push_back(static_cast<std::uint32_t>(tokens_.size()));
    }
    const std::size_t n = length_.size();
    // Latest end with a following token: per position, then up the suffix links, longest first.
    latest_.assign(n, none);
    std::size_t doc = 0;
    for (std::size_t p = 0; p < state_at.size(); ++p) {
      while (ends_[doc] <= p) ++doc;
      if (p + 1 < ends_[doc]) latest_[state_at[p]] = static_cast<std::uint32_t>(p);
    }
    std::vector<std::uint32_t> by_length(n), bucket(tokens_.size() + 2, 0);
    for (std::size_t s = 0; s < n; ++s) ++bucket[length_[s] + 1];
    for (std::size_t i = 1; i < bucket.size(); ++i) bucket[i] += bucket[i - 1];
    for (std::size_t s = 0; s < n; ++s)
      by_length[bucket[length_[s]]++] = static_cast<std::uint32_t>(s);
    for (std::size_t i = n; i-- > 1;) {
      const std::uint32_t s = by_length[i], up = link_[s];
      if (latest_[s] != none && (latest_[up] == none || latest_[s] > latest_[up]))
        latest_[up] = latest_[s];
    }
    // Transitions per state, sorted by token.
    edge_begin_.assign(n + 1, 0);
    for (std::size_t s = 0; s < n; ++s)
      for (std::uint32_t e = b.first_edge[s]; e != none; e = b.edges[e].next) ++edge_begin_[s + 1];
    for (std::size_t s = 0; s < n; ++s) edge_begin_[s + 1] += edge_begin_[s];
    edge_token_.resize(b.edges.size());
    edge_target_.resize(b.edges.size());
    std::vector<std::pair<token_id, std::uint32_t>> out;
    for (std::size_t s = 0; s < n; ++s) {
      out.clear();
      for (std::uint32_t e = b.first_edge[s]; e != none; e = b.edges[e].next)
        out.emplace_back(static_cast<token_id>(b.edges[e].token), b.edges[e].target);
      std::sort(out.begin(), out.end());
      for (std::size_t i = 0; i < out.size(); ++i) {
        edge_token_[edge_begin_[s] + i] = out[i].first;
        edge_target_[edge_begin_[s] + i] = out[i].second;
      }
    }
    for (auto* v : {&tokens_, &edge_token_}) v->shrink_to_fit();
    for (auto* v : {&length_, &link_, &latest_, &edge_begin_, &edge_target_, &ends_})
      v->shrink_to_fit();
  }

  std::vector<token_id> tokens_;
  std::vector<std::uint32_t> length_, link_, latest_;  // per state
  std::vector<std::uint32_t> edge_begin_;              // per state + 1: its transitions' range
  std::vector<token_id> edge_token_;                   // sorted within a state
  std::vector<std::uint32_t> edge_target_;
  std::vector<std::uint32_t> ends_;  // per document: its end position (exclusive)
};

/// The longest suffix of a stream that occurs in a document_automaton, kept as (state, length)
/// and updated in amortised O(1) automaton steps per token.
struct document_matcher {
  std::uint32_t state = document_automaton::root;
  std::size_t length = 0;

  void feed(const document_automaton& a, token_id t) noexcept {
    while (state != document_automaton::root && a.next(state, t) == document_automaton::none) {
      state = a.link(state);
      length = a.length(state);
    }
    const std::uint32_t r = a.next(state, t);
    if (r == document_automaton::none) {
      length = 0;
      return;
    }
    state = r;
    ++length;
  }

  /// The longest suffix with an occurrence followed by a token of its document: (state, length),
  /// state = root when there is none. O(steps up the suffix links).
  document_matcher with_continuation(const document_automaton& a) const noexcept {
    document_matcher m = *this;
    while (m.state != document_automaton::root &&
           a.latest_end(m.state) == document_automaton::none) {
      m.state = a.link(m.state);
      m.length = a.length(m.state);
    }
    return m;
  }
};

}  // namespace specdec::detail
