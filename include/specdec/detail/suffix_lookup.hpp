// specdec/detail/suffix_lookup.hpp - the unbounded prompt lookup (ngram_drafter with
// max_ngram = 0): the longest earlier match of the history's suffix from a suffix automaton, and
// the continuation rules over its occurrences.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "specdec/detail/suffix_automaton.hpp"
#include "specdec/types.hpp"

namespace specdec::detail {

/// Draft candidates kept between calls: clear() keeps every candidate's storage, so that a list
/// refilled with as many candidates of at most as many tokens allocates nothing. Iterates over
/// the candidates in use (each a std::vector<token_id>). Not thread-safe.
class candidate_list {
 public:
  void clear() noexcept { size_ = 0; }
  std::size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  /// A new last candidate, empty. References to candidates are valid until the next push.
  std::vector<token_id>& push() {
    if (size_ == items_.size()) items_.emplace_back();
    std::vector<token_id>& c = items_[size_++];
    c.clear();
    return c;
  }
  void pop() noexcept { --size_; }
  std::vector<token_id>& operator[](std::size_t i) noexcept { return items_[i]; }
  const std::vector<token_id>& operator[](std::size_t i) const noexcept { return items_[i]; }
  const std::vector<token_id>* begin() const noexcept { return items_.data(); }
  const std::vector<token_id>* end() const noexcept { return items_.data() + size_; }
  /// Moves candidate `from` to place `to`, the ones between shifting by one (no allocation).
  void move(std::size_t from, std::size_t to) noexcept {
    auto at = items_.begin();
    if (from > to)
      std::rotate(at + static_cast<std::ptrdiff_t>(to), at + static_cast<std::ptrdiff_t>(from),
                  at + static_cast<std::ptrdiff_t>(from + 1));
    else if (from < to)
      std::rotate(at + static_cast<std::ptrdiff_t>(from), at + static_cast<std::ptrdiff_t>(from + 1),
                  at + static_cast<std::ptrdiff_t>(to + 1));
  }
  /// Removes candidate i (its storage is kept for a later push).
  void erase(std::size_t i) noexcept {
    move(i, size_ - 1);
    --size_;
  }
  /// Room for `count` candidates of `length` tokens: filling that much allocates nothing.
  void reserve(std::size_t count, std::size_t length) {
    if (items_.size() < count) items_.resize(count);
    for (auto& c : items_) c.reserve(length);
  }
  /// Keeps the first n candidates.
  void truncate(std::size_t n) noexcept { size_ = std::min(size_, n); }

 private:
  std::vector<std::vector<token_id>> items_;
  std::size_t size_ = 0;
};

/// How suffix_lookup turns the longest match into a draft (see ngram_match_policy).
struct lookup_rule {
  enum class kind {
    latest,              ///< copy from the latest occurrence
    latest_or_earliest,  ///< the latest if it offers k tokens, else the earliest (the most)
    most_frequent,       ///< token by token, the most frequent continuation (ties: the latest)
  };
  kind policy = kind::latest;
  std::size_t min_length = 1;  ///< shorter matches propose nothing
  double adaptive_factor = 0;  ///< > 0: at most ceil(factor * match length) tokens per draft
};

/**
 * The searched text is the automaton's stream t[0..N): the whole history, or under prompt-only
 * search the prompt alone, with the tokens after it fed through a matcher (the longest suffix of
 * the history that occurs in the prompt, kept as (state, length) in amortised O(1) per token).
 *
 * An occurrence of the match is an end position e <= N - 2 (a token follows it). With
 * "corrected" statistics of a state s followed by token c, meaning the occurrences of s ending
 * at j <= N - 2 with t[j + 1] = c: the automaton's own statistics count ends <= N - 2 of s.c,
 * i.e. j <= N - 3, so the end j = N - 2 (when s ends there) is added for c = t[N - 1].
 */
class suffix_lookup {
 public:
  using sam = suffix_automaton;
  static constexpr std::uint32_t none = sam::none;

  struct match_info {
    std::uint32_t state = sam::root;
    std::size_t length = 0;
  };
  struct child_info {
    token_id token;
    std::uint32_t state;
    std::uint32_t count;  // occurrences of the match followed by token
    std::uint32_t last;   // latest such occurrence's end + 1 (position of token)
  };

  /// Forgets the sequence. prompt_only: the automaton holds the first `prompt_length` tokens.
  void clear(bool prompt_only, std::size_t prompt_length) {
    automaton_.clear();
    after_prompt_.clear();
    prompt_only_ = prompt_only;
    prompt_length_ = prompt_length;
    matcher_ = {};
  }
  void reserve(std::size_t n) { automaton_.reserve(n); }

  /// Appends tokens to the history. Amortised O(log n) per token.
  void push(std::span<const token_id> ts) {
    if (prompt_only_) {
      const std::size_t room = prompt_length_ - std::min(prompt_length_, automaton_.size());
      const auto head = ts.first(std::min(room, ts.size()));
      automaton_.push(head);
      if (!head.empty()) matcher_ = {automaton_.whole(), automaton_.size()};
      for (const token_id t : ts.subspan(head.size())) feed_matcher(t);
      after_prompt_.insert(after_prompt_.end(),
                           ts.begin() + static_cast<std::ptrdiff_t>(head.size()), ts.end());
    } else {
      automaton_.push(ts);
    }
  }

  std::size_t size() const noexcept { return automaton_.size() + after_prompt_.size(); }
  std::size_t memory_bytes() const noexcept {
    return automaton_.memory_bytes() + after_prompt_.capacity() * sizeof(token_id);
  }
  token_id at(std::size_t i) const noexcept {
    return i < automaton_.size() ? automaton_.tokens()[i] : after_prompt_[i - automaton_.size()];
  }
  std::vector<token_id> history() const {
    std::vector<token_id> h(automaton_.tokens().begin(), automaton_.tokens().end());
    h.insert(h.end(), after_prompt_.begin(), after_prompt_.end());
    return h;
  }
  /// N: the searched text is t[0..N).
  std::size_t limit() const noexcept { return automaton_.size(); }
  std::span<const token_id> text() const noexcept { return automaton_.tokens(); }
  sam& automaton() noexcept { return automaton_; }

  /// The longest suffix of the history with an occurrence ending at e <= N - 2 (state root and
  /// length 0 when there is none). O(1).
  match_info match() {
    match_info m;
    if (!prompt_only_) {
      m.state = automaton_.match();
      m.length = automaton_.length(m.state);
    } else {
      m = matcher_;
    }
    return with_earlier_end(m);
  }

  /// The latest occurrence of state s: its end e <= N - 2.
  std::uint32_t latest_end(std::uint32_t s) { return automaton_.stats(s).last; }

  /// Occurrences of s followed by each token, corrected (see the class comment), count > 0
  /// only, in the automaton's transition order. O(out-degree * log n).
  void children(std::uint32_t s, std::vector<child_info>& out) {
    out.clear();
    const std::size_t n = limit();
    const bool ends_before_last = n >= 2 && automaton_.stats(s).last == n - 2;
    const token_id final_token = n >= 1 ? automaton_.tokens()[n - 1] : 0;
    automaton_.for_each_child(s, [&](token_id t, std::uint32_t r) {
      out.push_back(child_info{t, r, 0, none});
    });
    for (child_info& c : out) {
      const auto v = automaton_.stats(c.state);
      c.count = v.count;
      c.last = v.last;
      if (ends_before_last && c.token == final_token) {
        ++c.count;
        c.last = static_cast<std::uint32_t>(n - 1);
      }
    }
    std::erase_if(out, [](const child_info& c) { return c.count == 0; });
  }

  /// The draft for the current history under `rule`, at most k tokens, appended to out.
  void propose(const lookup_rule& rule, std::size_t k, std::vector<token_id>& out) {
    const match_info m = match();
    if (m.state == sam::root || m.length < rule.min_length) return;
    k = draft_length(rule, m.length, k);
    if (rule.policy != lookup_rule::kind::most_frequent) {
      append_continuation(chosen_end(rule, m.state, k), k, out);
      return;
    }
    for (std::uint32_t s = m.state; out.size() < k;) {  // O(k * out-degree * log n)
      children(s, kids_);
      if (kids_.empty()) return;
      const child_info& best = *std::min_element(kids_.begin(), kids_.end(), ranks_before);
      out.push_back(best.token);
      s = best.state;
    }
  }

  /// Up to n distinct drafts grown best first as a tree (docs/ngram.md, "Which continuation"):
  /// propose() first; then, while fewer than n, the untaken branch of highest value, where a
  /// branch is a token x != the draft's own at position d of a draft already taken, worth
  /// P(draft's first d tokens) * P(x), both from predict(); it is taken as the draft's first d
  /// tokens, then the text from the latest occurrence of x after the longest context that had it.
  /// Ties: shallower, then later occurrence, then earlier draft.
  /// O(n * K * max_blended * max_context_count * log n).
  /// Appended to `result` (which must be empty); allocates nothing once its storage and this
  /// lookup's scratch have held as many drafts.
  void candidates(const lookup_rule& rule, std::size_t k, std::size_t n,
                  candidate_list& result) {
    // Sized for the most a call can use: n drafts of k tokens, each position's predictions.
    predicted_.reserve(max_blended * max_context_count);  // predict() swaps the two
    merged_.reserve(max_blended * max_context_count);
    kids_.reserve(max_context_count + 1);
    branches_.reserve(n * k * max_blended * max_context_count);
    propose(rule, k, result.push());
    if (result[0].empty()) {
      result.pop();
      return;
    }
    const match_info m = match();
    k = draft_length(rule, m.length, k);
    branches_.clear();
    grow(rule, result, 0, 0, m, 1.0);
    while (result.size() < n && !branches_.empty()) {
      std::pop_heap(branches_.begin(), branches_.end(), worse);
      const branch b = branches_.back();
      branches_.pop_back();
      std::vector<token_id>& c = result.push();
      const std::vector<token_id>& from = result[b.draft];
      c.assign(from.begin(), from.begin() + static_cast<std::ptrdiff_t>(b.depth));
      append_continuation(b.at - 1, k - b.depth, c);
      grow(rule, result, result.size() - 1, b.depth + 1,
           advance(b.context, b.token, rule.min_length), b.value);
    }
  }

  /// How many contexts predict() blends: the longest ones with distinct occurrence sets.
  static constexpr std::size_t max_blended = 4;
  /// Contexts followed more often than this are not read by predict() (nor any shorter one):
  /// it bounds the children read per context, hence a call's cost, at long histories where
  /// short contexts have thousands of different followers.
  static constexpr std::uint32_t max_context_count = 64;

  /// One predicted next token: its probability and the position of its latest occurrence after
  /// the longest blended context that was followed by it.
  struct prediction {
    token_id token;
    double p;
    std::uint32_t at;
  };

  /// The next-token distribution after the context state s (PPM with escape method C, Moffat
  /// 1990, without exclusion): over s and its suffix-link ancestors of length >= min_length,
  /// skipping one whose occurrence count equals the previous one's, the first max_blended,
  /// stopping before the first with more than max_context_count occurrences; a
  /// context with T occurrences followed by q distinct tokens gives token c
  /// weight * count(c) / (T + q) and passes weight * q / (T + q) on. Sorted by token.
  /// O(max_blended * max_context_count * log n).
  void predict(std::uint32_t s, std::size_t min_length, std::vector<prediction>& out) {
    out.clear();
    double weight = 1;
    std::uint32_t previous = 0;
    std::size_t blended = 0;
    for (std::uint32_t u = s;
         u != sam::root && automaton_.length(u) >= min_length && blended < max_blended;
         u = automaton_.link(u)) {
      const std::uint32_t total = automaton_.stats(u).count;
      if (total == previous) continue;  // the same occurrences (or none)
      if (total > max_context_count) break;
      previous = total;
      ++blended;
      children(u, kids_);
      std::sort(kids_.begin(), kids_.end(),
                [](const child_info& a, const child_info& b) { return a.token < b.token; });
      const double denom = static_cast<double>(total) + static_cast<double>(kids_.size());
      merged_.clear();
      auto it = out.begin();
      for (const child_info& c : kids_) {
        for (; it != out.end() && it->token < c.token; ++it) merged_.push_back(*it);
        const double p = weight * static_cast<double>(c.count) / denom;
        if (it != out.end() && it->token == c.token) {
          merged_.push_back({c.token, it->p + p, it->at});
          ++it;
        } else {
          merged_.push_back({c.token, p, c.last});
        }
      }
      merged_.insert(merged_.end(), it, out.end());
      out.swap(merged_);
      weight *= static_cast<double>(kids_.size()) / denom;
    }
  }

  /// The context after appending t to a context c: the longest suffix with an occurrence ending
  /// at e <= N - 2 (state root when it is shorter than min_length). O(link steps).
  match_info advance(match_info c, token_id t, std::size_t min_length) {
    const match_info m = with_earlier_end(extend(c, t));
    if (m.state == sam::root || m.length < min_length) return {};
    return m;
  }

  /// Appends t[e + 1 .. e + min(k, N - 1 - e)] to out.
  void append_continuation(std::uint32_t e, std::size_t k, std::vector<token_id>& out) const {
    const auto tokens = automaton_.tokens().subspan(e + 1, std::min(k, limit() - 1 - e));
    out.insert(out.end(), tokens.begin(), tokens.end());
  }

  /// The draft length for a match of `match_length` tokens: k, or less under adaptive_factor.
  static std::size_t draft_length(const lookup_rule& rule, std::size_t match_length,
                                  std::size_t k) noexcept {
    if (rule.adaptive_factor <= 0) return k;
    const double cap = rule.adaptive_factor * static_cast<double>(match_length);
    return cap >= static_cast<double>(k) ? k : static_cast<std::size_t>(std::ceil(cap));
  }

 private:
  static bool ranks_before(const child_info& a, const child_info& b) noexcept {
    return a.count != b.count ? a.count > b.count : a.last > b.last;
  }

  // An untaken branch of candidates(): token at position depth of draft `draft`, whose node has
  // the context `context`.
  struct branch {
    double value;
    std::size_t draft, depth;
    token_id token;
    std::uint32_t at;
    match_info context;
  };
  // Heap order: a ranks after b (lower value; deeper; earlier occurrence; later draft).
  static bool worse(const branch& a, const branch& b) noexcept {
    if (a.value != b.value) return a.value < b.value;
    if (a.depth != b.depth) return a.depth > b.depth;
    if (a.at != b.at) return a.at < b.at;
    return a.draft > b.draft;
  }

  // Adds the branches along draft i from position `from` (whose context is c, reached with
  // probability reach).
  void grow(const lookup_rule& rule, const candidate_list& drafts,
            std::size_t i, std::size_t from, match_info c, double reach) {
    const std::vector<token_id>& draft = drafts[i];
    for (std::size_t d = from; d < draft.size() && c.state != sam::root && reach > 0; ++d) {
      predict(c.state, rule.min_length, predicted_);
      double p_own = 0;
      for (const prediction& p : predicted_) {
        if (p.token == draft[d]) {
          p_own = p.p;
          continue;
        }
        branches_.push_back({reach * p.p, i, d, p.token, p.at, c});
        std::push_heap(branches_.begin(), branches_.end(), worse);
      }
      reach *= p_own;
      // Only a predicted token is followed: it follows one of the states predict() read, so
      // advance() takes at most max_blended + 1 link steps.
      if (reach > 0) c = advance(c, draft[d], rule.min_length);
    }
  }

  std::uint32_t chosen_end(const lookup_rule& rule, std::uint32_t s, std::size_t k) {
    const std::uint32_t latest = latest_end(s);
    if (rule.policy != lookup_rule::kind::latest_or_earliest || limit() - 1 - latest >= k)
      return latest;
    return std::min(latest, automaton_.first_end(s));
  }

  void feed_matcher(token_id t) { matcher_ = extend(matcher_, t); }

  // The longest suffix of (c's text + t) that occurs in the automaton's text, with its length:
  // c shortened through suffix links until it has a transition by t, then moved by it; the root
  // (length 0) when t never occurs. Amortised O(1) over a stream fed token by token.
  match_info extend(match_info c, token_id t) const {
    while (c.state != sam::root && automaton_.next(c.state, t) == none) {
      c.state = automaton_.link(c.state);
      c.length = automaton_.length(c.state);
    }
    const std::uint32_t r = automaton_.next(c.state, t);
    if (r == none) return {};
    return {r, c.length + 1};
  }

  // m, or its suffix link when m's only end is the last position N - 1 (no earlier occurrence).
  // Only one state ends at N - 1 alone, the whole text's (any other state ending at N - 1 is
  // one of its suffix-link ancestors, whose end sets are larger), so it is that state, found
  // without reading the statistics, and one step up is enough. O(1).
  match_info with_earlier_end(match_info m) const noexcept {
    if (m.state != sam::root && m.state == automaton_.whole()) {
      m.state = automaton_.link(m.state);
      m.length = automaton_.length(m.state);
    }
    return m;
  }

  sam automaton_;
  std::vector<token_id> after_prompt_;  // prompt_only: the history after the prompt
  bool prompt_only_ = false;
  std::size_t prompt_length_ = 0;
  match_info matcher_;
  std::vector<child_info> kids_;  // scratch
  std::vector<prediction> predicted_, merged_;
  std::vector<branch> branches_;
};

}  // namespace specdec::detail
