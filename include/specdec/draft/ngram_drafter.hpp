// specdec/draft/ngram_drafter.hpp - prompt lookup drafting from an incremental n-gram index.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "specdec/concepts/drafter.hpp"
#include "specdec/detail/ngram_index.hpp"
#include "specdec/detail/document_automaton.hpp"
#include "specdec/detail/suffix_lookup.hpp"
#include "specdec/draft/ngram_options.hpp"
#include "specdec/math/rng.hpp"
#include "specdec/math/sampling_params.hpp"
#include "specdec/tree/token_tree.hpp"
#include "specdec/tree/tree_draft.hpp"
#include "specdec/types.hpp"

namespace specdec {

/**
 * Prompt lookup ("n-gram") drafter: finds the longest suffix of the history, max_ngram tokens down
 * to min_ngram, that occurred earlier, and proposes the up to K tokens that followed that earlier
 * occurrence. Only tokens that exist are proposed, so a draft is shorter than K when the
 * occurrence ends near the end of the searched text; no match gives an empty draft. Drafts are
 * deterministic: `draft::q` is left with no rows. Models specdec::Drafter.
 *
 * Indexes: max_ngram = 0 (the default) keeps a suffix automaton with occurrence statistics in a
 * link-cut tree (detail/suffix_lookup.hpp: matches of any length, amortised O(log n) per token);
 * max_ngram in 1..64 a suffix trie over the reversed stream bounded at that depth, stored as
 * exact hash tables (detail/ngram_index.hpp). docs/ngram.md says why and what each costs.
 * With ngram_options::cache set, earlier generations (an ngram_cache snapshot taken when the
 * sequence starts) are searched after the own context: a matcher over the snapshot advances
 * with every appended token (amortised O(log out-degree)), and the cache's draft is used when
 * its match is longer than the own context's.
 *
 * Incremental: history only grows between resets. Each call indexes only the tokens appended since
 * the last call (accept() indexes its tokens at once). A history shorter than the indexed one, or
 * one whose first or last indexed token differs (an O(1) spot check), is treated as a new
 * sequence and the index is rebuilt; a caller that rewrites tokens in the middle must call reset().
 *
 * Cost of the bounded index: update O(max_ngram) expected, amortised, per appended token; propose
 * O(max_ngram + K); memory O(context * max_ngram): about 4 * (max_ngram - min_ngram + 2) bytes
 * per token, plus one 16-byte table slot per distinct m-gram for every m in 1..max_ngram (about
 * twice that at load <= 1/2), plus 4 * (max_ngram - min_ngram + 1) bytes per prompt token under
 * prompt_only.
 * Not thread-safe: one drafter per sequence; distinct drafters are independent (they may share one
 * ngram_cache, which is thread-safe). Contexts are
 * limited to 2^29 tokens with the unbounded index (its state numbers and transition slots are
 * 32-bit) and to 2^32 - 3 with the bounded one (std::length_error beyond, before anything is
 * indexed).
 */
class ngram_drafter {
 public:
  /// Throws std::invalid_argument when `options` is invalid (see ngram_options::validate).
  explicit ngram_drafter(ngram_options options = {}) : options_(options) {
    options_.validate();
    if (!unbounded()) index_.configure(options_.min_ngram, options_.max_ngram);
  }

  const ngram_options& options() const noexcept { return options_; }

  /// specdec::Drafter: out <- up to min(k, max_draft) tokens, out.q with no rows. `sp` and `g` are
  /// unused (lookup is deterministic). O(new tokens * max_ngram + max_ngram + K).
  void propose(std::span<const token_id> history, std::size_t k,
               [[maybe_unused]] const sampling_params& sp, [[maybe_unused]] rng& g, draft& out) {
    out.clear();
    propose_into(history, k, out.tokens);
  }

  /// Engine-friendly form of propose: the draft tokens (empty when nothing matches).
  std::vector<token_id> propose(std::span<const token_id> history, std::size_t k) {
    std::vector<token_id> out;
    propose_into(history, k, out);
    return out;
  }

  /// Like propose, writing into `out` (cleared first) to reuse its capacity.
  void propose_into(std::span<const token_id> history, std::size_t k, std::vector<token_id>& out) {
    out.clear();
    sync(history);
    k = std::min(k, options_.max_draft);
    if (k == 0) return;
    if (unbounded() && cache_draft(k, out)) return;
    out.clear();
    const std::size_t limit = search_limit();
    if (limit < 2) return;
    if (unbounded()) return lookup_.propose(rule(), k, out);
    for (std::size_t m = std::min(options_.max_ngram, index_.size()); m >= options_.min_ngram;
         --m) {
      std::uint32_t e = first_occurrence(m, limit);
      if (e == none) continue;
      if (options_.match == ngram_match_policy::longest_continuation) e = longest(e, m, k, limit);
      append_continuation(e, k, limit, out);
      return;
    }
  }

  /**
   * Up to n pairwise different continuations (each up to min(k, max_draft) tokens) for a
   * multi-candidate (trie) verifier. Unbounded (max_ngram = 0): propose(history, k) first, then
   * the most probable branches off the drafts taken, each worth P(reaching its position) * P(its
   * token) from the occurrence counts (PPM-style; docs/ngram.md), continued by copying;
   * O(n * k * 4 * 64 * log N): per draft position at most 4 contexts of at most 64 occurrences.
   * Bounded: from different earlier occurrences, longest matching n-gram first; within one
   * length, most recent occurrence first; shorter lengths fill the remaining places; at most
   * max_candidate_scan occurrences examined per length; under most_recent, element 0 equals
   * propose(history, k); O(max_ngram * max_candidate_scan * k * n).
   */
  std::vector<std::vector<token_id>> propose_candidates(std::span<const token_id> history,
                                                        std::size_t k, std::size_t n) {
    collect_candidates(history, k, n);
    return {candidates_.begin(), candidates_.end()};
  }

  /**
   * specdec::TreeDrafter: up to branching[0] distinct continuations of up to branching.size()
   * tokens (see propose_candidates), merged best first into a trie under history.back() that
   * keeps to `branching` node by node: a node at depth d keeps the first branching[d] children
   * (a later continuation that would add one more is cut there; token_tree::from_candidates).
   * Deterministic: out.draw = candidate_draw::deterministic, out.q has no rows; `sp`, `g`,
   * `draw` are unused.
   */
  void propose_tree(std::span<const token_id> history, std::span<const std::size_t> branching,
                    [[maybe_unused]] const sampling_params& sp, [[maybe_unused]] rng& g,
                    [[maybe_unused]] candidate_draw draw, tree_draft& out) {
    out.draw = candidate_draw::deterministic;
    out.q.resize(0, out.q.cols());
    const token_id root = history.empty() ? 0 : history.back();
    if (branching.empty() || branching[0] == 0 || history.empty()) {
      out.tree.reset(root);
      return;
    }
    collect_candidates(history, branching.size(), branching[0]);
    out.tree.assign_candidates(root, candidates_, branching, trie_ws_);  // in place
  }

  /// specdec::Drafter: indexes tokens that joined the history. Ignored before the first propose
  /// after reset (the next history is then indexed whole). O(c.size() * max_ngram).
  void accept(std::span<const token_id> committed) {
    if (!synced_) return;
    check_length(size() + committed.size());
    if (unbounded()) {
      lookup_.push(committed);
      feed_cache(committed);
    } else
      index_.push(committed);
  }

  /// specdec::Drafter: forgets the sequence and any set_prompt_length. Keeps allocated capacity.
  void reset() {
    if (unbounded()) {
      lookup_.clear(false, 0);
      snapshot_.reset();
      cache_match_ = {};
    } else
      index_.clear();
    synced_ = false;
    prompt_explicit_ = false;
    prompt_length_ = 0;
  }

  /// Declares the first `n` tokens of the sequence to be the prompt (for prompt_only search),
  /// overriding the first-history rule until reset(). Rebuilds the index if it holds tokens.
  void set_prompt_length(std::size_t n) {
    prompt_explicit_ = true;
    prompt_length_ = n;
    if (synced_) {
      const std::vector<token_id> copy =
          unbounded() ? lookup_.history()
                      : std::vector<token_id>(index_.tokens().begin(), index_.tokens().end());
      rebuild(copy);
    }
  }

  /// Pre-sizes the index for a context of `n` tokens so that growing to n never reallocates or
  /// rehashes (no latency spikes); sized for the worst case of all-distinct n-grams, about
  /// 32 * max_ngram + 4 * (max_ngram - min_ngram + 2) bytes per token (the unbounded index:
  /// about 155-220). Survives reset(). std::length_error, before allocating, for an n beyond
  /// the context limit.
  void reserve(std::size_t n) {
    check_length(n);
    if (unbounded())
      lookup_.reserve(n);
    else
      index_.reserve(n);
  }

  /// The prompt length in use (0 before the first history after reset, unless set).
  std::size_t prompt_length() const noexcept { return prompt_length_; }

  /// Bytes the index holds (allocated capacity, the copy of the tokens included). O(max_ngram).
  std::size_t memory_bytes() const noexcept {
    return unbounded() ? lookup_.memory_bytes() : index_.memory_bytes();
  }

  /// Number of indexed tokens (the history length as of the last call).
  std::size_t size() const noexcept { return unbounded() ? lookup_.size() : index_.size(); }

 private:
  static constexpr std::uint32_t none = detail::ngram_index::none;

  void check_length(std::size_t n) const {
    if (unbounded() && n > detail::suffix_automaton::max_tokens)
      throw std::length_error("ngram_drafter: history longer than 2^29 tokens (max_ngram = 0)");
    if (n >= static_cast<std::size_t>(none) - 1)
      throw std::length_error("ngram_drafter: history longer than 2^32 - 3 tokens");
  }

  // Brings the index up to `history`: appends its new tokens, or rebuilds on a mismatch.
  void sync(std::span<const token_id> history) {
    const std::size_t n = size();
    if (!synced_ || history.size() < n ||
        (n > 0 && (history[0] != indexed(0) || history[n - 1] != indexed(n - 1)))) {
      rebuild(history);
      return;
    }
    check_length(history.size());
    if (unbounded()) {
      lookup_.push(history.subspan(n));
      feed_cache(history.subspan(n));
    } else
      index_.push(history.subspan(n));
  }

  bool unbounded() const noexcept { return options_.max_ngram == 0; }
  token_id indexed(std::size_t i) const noexcept {
    return unbounded() ? lookup_.at(i) : index_.tokens()[i];
  }

  void rebuild(std::span<const token_id> history) {
    check_length(history.size());
    synced_ = false;
    if (!prompt_explicit_) prompt_length_ = history.size();
    if (unbounded()) {
      const bool prompt_only = options_.search == ngram_search_policy::prompt_only;
      lookup_.clear(prompt_only, prompt_only ? prompt_length_ : 0);
      lookup_.push(history);
      start_cache(history);
      synced_ = true;
      return;
    }
    index_.clear();
    // The per-prompt-position table is read only by prompt_only search: don't build it otherwise.
    const std::size_t prompt_count =
        options_.search == ngram_search_policy::prompt_only && prompt_length_ > 0
            ? prompt_length_ - 1
            : 0;
    index_.set_prompt_count(static_cast<std::uint32_t>(std::min<std::size_t>(prompt_count, none)));
    index_.push(history);
    synced_ = true;
  }

  // Occurrences must end at or before limit - 2 so that at least one token follows them.
  std::size_t search_limit() const noexcept {
    if (unbounded()) return lookup_.limit();
    return options_.search == ngram_search_policy::prompt_only
               ? std::min(prompt_length_, index_.size())
               : index_.size();
  }

  // The latest earlier occurrence of the current m-token suffix that ends before limit - 1.
  std::uint32_t first_occurrence(std::size_t m, std::size_t limit) const noexcept {
    std::uint32_t e = options_.search == ngram_search_policy::prompt_only
                          ? index_.prompt_head_of_last(m)
                          : index_.prev(static_cast<std::uint32_t>(index_.size() - 1), m);
    while (e != none && e + 2 > limit) e = index_.prev(e, m);
    return e;
  }

  // longest_continuation: visits at most k + 1 occurrences, since all those offering fewer than
  // k tokens end within the last k positions of the searched text.
  std::uint32_t longest(std::uint32_t e, std::size_t m, std::size_t k,
                        std::size_t limit) const noexcept {
    std::uint32_t best = e;
    for (; e != none; e = index_.prev(e, m)) {
      best = e;
      if (limit - 1 - e >= k) break;
    }
    return best;
  }

  void append_continuation(std::uint32_t e, std::size_t k, std::size_t limit,
                           std::vector<token_id>& out) const {
    const std::size_t count = std::min(k, limit - 1 - e);
    const auto tokens = index_.tokens().subspan(e + 1, count);
    out.insert(out.end(), tokens.begin(), tokens.end());
  }

  // The cross-request cache: the snapshot this sequence reads (taken when it starts) and the
  // longest suffix of the history found in it.
  void start_cache(std::span<const token_id> history) {
    snapshot_ = options_.cache ? options_.cache->current() : nullptr;
    cache_match_ = {};
    feed_cache(history);
  }
  void feed_cache(std::span<const token_id> ts) noexcept {
    if (!snapshot_) return;
    for (const token_id t : ts) cache_match_.feed(*snapshot_, t);
  }

  // out <- the cache's draft when it has a match >= min_ngram (else empty). Returns whether that
  // match is longer than the own context's longest earlier match (the cache's draft wins).
  bool cache_draft(std::size_t k, std::vector<token_id>& out) {
    out.clear();
    if (!snapshot_) return false;
    const auto m = cache_match_.with_continuation(*snapshot_);
    if (m.state == detail::document_automaton::root || m.length < options_.min_ngram)
      return false;
    k = detail::suffix_lookup::draft_length(rule(), m.length, k);
    const auto tokens = snapshot_->continuation(snapshot_->latest_end(m.state), k);
    out.assign(tokens.begin(), tokens.end());
    return m.length > lookup_.match().length;
  }

  // propose_candidates into candidates_ (kept between calls: no allocation once warm).
  void collect_candidates(std::span<const token_id> history, std::size_t k, std::size_t n) {
    sync(history);
    candidates_.clear();
    k = std::min(k, options_.max_draft);
    candidates_.reserve(n + 1, k);  // the cache's draft may join before the list is cut to n
    scratch_.reserve(k);
    const std::size_t limit = search_limit();
    if (k == 0 || n == 0) return;
    if (unbounded()) {
      if (limit >= 2) lookup_.candidates(rule(), k, n, candidates_);
      merge_cache_candidate(k, n, candidates_);
      return;
    }
    if (limit < 2) return;
    std::vector<token_id>& candidate = scratch_;
    for (std::size_t m = std::min(options_.max_ngram, index_.size()); m >= options_.min_ngram;
         --m) {
      std::uint32_t e = first_occurrence(m, limit);
      for (std::size_t scanned = 0; e != none && scanned < options_.max_candidate_scan;
           ++scanned, e = index_.prev(e, m)) {
        candidate.clear();
        append_continuation(e, k, limit, candidate);
        if (std::find(candidates_.begin(), candidates_.end(), candidate) != candidates_.end())
          continue;
        candidates_.push().assign(candidate.begin(), candidate.end());
        if (candidates_.size() == n) return;
      }
    }
  }

  // Candidates: the cache's draft first when it wins (as propose), else second.
  void merge_cache_candidate(std::size_t k, std::size_t n, detail::candidate_list& r) {
    std::vector<token_id>& c = scratch_;
    const bool wins = cache_draft(k, c);
    if (c.empty()) return;
    for (std::size_t i = r.size(); i-- > 0;)
      if (r[i] == c) r.erase(i);
    const std::size_t at = wins || r.empty() ? 0 : 1;
    r.push().assign(c.begin(), c.end());
    r.move(r.size() - 1, at);
    r.truncate(n);
  }

  detail::lookup_rule rule() const noexcept {
    using r = detail::lookup_rule;
    r::kind kind = r::kind::latest;
    if (options_.match == ngram_match_policy::longest_continuation)
      kind = r::kind::latest_or_earliest;
    if (options_.match == ngram_match_policy::most_frequent) kind = r::kind::most_frequent;
    return {kind, options_.min_ngram, options_.adaptive_factor};
  }

  ngram_options options_;
  detail::candidate_list candidates_;  // propose_tree's continuations, storage kept
  std::vector<token_id> scratch_;
  trie_workspace trie_ws_;
  detail::ngram_index index_;
  detail::suffix_lookup lookup_;
  std::shared_ptr<const detail::document_automaton> snapshot_;  // options_.cache's, per sequence
  detail::document_matcher cache_match_;
  std::size_t prompt_length_ = 0;
  bool prompt_explicit_ = false;
  bool synced_ = false;
};

}  // namespace specdec
