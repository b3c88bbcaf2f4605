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
  /// length 0 when there is none). O(log n) amortised.
  match_info match() {
    match_info m;
    if (!prompt_only_) {
      m.state = automaton_.match();
      m.length = automaton_.length(m.state);
    } else {
      m = matcher_;
    }
    // Only one state ends at N - 1 alone (the whole text), so at most one step up.
    if (m.state != sam::root && automaton_.stats(m.state).count == 0) {
      m.state = automaton_.link(m.state);
      m.length = automaton_.length(m.state);
    }
    return m;
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

  /// Up to n distinct drafts: propose() first; then per state from the longest match down to
  /// rule.min_length, one per following token ranked by frequency (ties: the latest), each
  /// copied from the latest occurrence followed by that token.
  void candidates(const lookup_rule& rule, std::size_t k, std::size_t n,
                  std::vector<std::vector<token_id>>& result) {
    std::vector<token_id> first;
    propose(rule, k, first);
    if (first.empty()) return;
    result.push_back(std::move(first));
    const match_info m = match();
    for (std::uint32_t s = m.state;
         result.size() < n && s != sam::root && automaton_.length(s) >= rule.min_length;
         s = automaton_.link(s)) {
      children(s, kids_);
      std::sort(kids_.begin(), kids_.end(), ranks_before);
      for (const child_info& c : kids_) {
        std::vector<token_id> candidate;
        append_continuation(c.last - 1, k, candidate);
        if (std::find(result.begin(), result.end(), candidate) != result.end()) continue;
        result.push_back(std::move(candidate));
        if (result.size() == n) return;
      }
    }
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


  std::uint32_t chosen_end(const lookup_rule& rule, std::uint32_t s, std::size_t k) {
    const std::uint32_t latest = latest_end(s);
    if (rule.policy != lookup_rule::kind::latest_or_earliest || limit() - 1 - latest >= k)
      return latest;
    return std::min(latest, automaton_.first_end(s));
  }

  void feed_matcher(token_id t) {
    auto& [s, length] = matcher_;
    while (s != sam::root && automaton_.next(s, t) == none) {
      s = automaton_.link(s);
      length = automaton_.length(s);
    }
    const std::uint32_t r = automaton_.next(s, t);
    if (r == none) {
      length = 0;
      return;
    }
    s = r;
    ++length;
  }

  sam automaton_;
  std::vector<token_id> after_prompt_;  // prompt_only: the history after the prompt
  bool prompt_only_ = false;
  std::size_t prompt_length_ = 0;
  match_info matcher_;
  std::vector<child_info> kids_;  // scratch
};

}  // namespace specdec::detail
