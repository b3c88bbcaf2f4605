// specdec/detail/suffix_lookup.hpp - the unbounded prompt lookup (ngram_drafter with
// max_ngram = 0): the longest earlier match of the history's suffix from a suffix automaton, and
// the continuation rules over its occurrences.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "specdec/detail/suffix_automaton.hpp"
#include "specdec/types.hpp"

namespace specdec::detail {

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

  /// Appends t[e + 1 .. e + min(k, N - 1 - e)] to out.
  void append_continuation(std::uint32_t e, std::size_t k, std::vector<token_id>& out) const {
    const auto tokens = automaton_.tokens().subspan(e + 1, std::min(k, limit() - 1 - e));
    out.insert(out.end(), tokens.begin(), tokens.end());
  }

 private:
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
};

}  // namespace specdec::detail
