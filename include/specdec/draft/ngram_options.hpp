// specdec/draft/ngram_options.hpp - the settings of ngram_drafter (prompt lookup) and their
// entry check.
#pragma once

#include <cstddef>
#include <memory>
#include <stdexcept>
#include <string>

#include "specdec/detail/ngram_index.hpp"
#include "specdec/draft/ngram_cache.hpp"

namespace specdec {

/// Which earlier occurrence of the matched n-gram supplies the draft.
enum class ngram_match_policy {
  /// The latest occurrence (largest end position).
  most_recent,
  /// The occurrence with the most continuation tokens available, counted up to K; among several
  /// that offer all K, the latest. Differs from most_recent only when the latest occurrence ends
  /// within K tokens of the search end (typically inside a run such as "aaaa" or "abab").
  longest_continuation,
  /// Token by token, the token that most often followed the matched context (ties: the latest
  /// occurrence), then the same from the extended context (the rule of SuffixDecoding's
  /// frequency-ranked suffix tree). Needs max_ngram = 0.
  most_frequent,
};

/// Which part of the history is searched for earlier occurrences.
enum class ngram_search_policy {
  /// Prompt and generated tokens: every position before the current suffix.
  prompt_and_generated,
  /// The prompt alone, as if it were a separate document: the n-gram and its continuation must
  /// both lie inside the prompt. The prompt is the first history seen after construction or
  /// reset(), unless set_prompt_length() says otherwise.
  prompt_only,
};

/**
 * Settings of ngram_drafter; validate() throws std::invalid_argument naming the field and bound.
 *
 * Defaults: the longest earlier match of any length (max_ngram = 0, a suffix automaton), down to
 * one token, copied from its latest occurrence, at most 8 tokens. Measured on input-grounded
 * edits (docs/ngram.md, bench/ngram_rules_bench.cpp): on Llama 2 subword tokens 8.10 tokens per
 * step at K = 8 and 33.0 at K = 64, against 6.57 and 25.8 for the former defaults (2..4), and
 * better on every task; on byte tokens 8.48 and 40.1 against 5.69 and 22.0. A fixed max_ngram
 * caps the match where edits copy long spans; one-token matches add 1-5% on subword tokens
 * (a subword is already a word piece) at the price of drafting on almost every step, which a
 * caller with costly verification can trade back with min_ngram = 2 or adaptive_factor.
 */
struct ngram_options {
  std::size_t min_ngram = 1;  ///< shortest suffix that may match, >= 1.
  std::size_t max_ngram = 0;  ///< longest suffix tried first, in [min_ngram, 64]; 0 = unbounded
                              ///< (a suffix automaton: the longest earlier match of any length).
  std::size_t max_draft = 8;  ///< cap on the draft length K, >= 1; propose(k) uses min(k, cap).
  ngram_match_policy match = ngram_match_policy::most_recent;
  ngram_search_policy search = ngram_search_policy::prompt_and_generated;
  std::size_t max_candidate_scan = 64;  ///< occurrences examined per n-gram length by
                                        ///< propose_candidates, >= 1.
  /// Adaptive draft length: > 0 drafts at most ceil(adaptive_factor * match length) tokens (and
  /// never more than min(k, max_draft)), so a short, doubtful match costs few verified tokens;
  /// 0 = off. Needs max_ngram = 0.
  double adaptive_factor = 0;
  /// Cross-request cache: earlier generations searched after the request's own context (null =
  /// off, the default). Its draft is used when its match is strictly longer than the longest
  /// earlier match in the request's own context (and at least min_ngram); it is copied from the
  /// latest occurrence whatever `match` says. Needs max_ngram = 0. See ngram_cache.
  std::shared_ptr<const ngram_cache> cache = nullptr;

  void validate() const {
    if (min_ngram < 1)
      throw std::invalid_argument("ngram_options.min_ngram: must be >= 1, got " +
                                  std::to_string(min_ngram));
    if (max_ngram != 0 && min_ngram > max_ngram)
      throw std::invalid_argument("ngram_options.min_ngram: must be <= max_ngram (" +
                                  std::to_string(max_ngram) + "), got " +
                                  std::to_string(min_ngram));
    if (max_ngram > detail::ngram_index::max_levels)
      throw std::invalid_argument(
          "ngram_options.max_ngram: must be <= " + std::to_string(detail::ngram_index::max_levels) +
          ", got " + std::to_string(max_ngram));
    if (max_draft < 1)
      throw std::invalid_argument("ngram_options.max_draft: must be >= 1, got " +
                                  std::to_string(max_draft));
    if (max_candidate_scan < 1)
      throw std::invalid_argument("ngram_options.max_candidate_scan: must be >= 1, got " +
                                  std::to_string(max_candidate_scan));
    if (!(adaptive_factor >= 0 && adaptive_factor <= 1e6))
      throw std::invalid_argument("ngram_options.adaptive_factor: must be in [0, 1e6], got " +
                                  std::to_string(adaptive_factor));
    if (max_ngram != 0 && match == ngram_match_policy::most_frequent)
      throw std::invalid_argument("ngram_options.match: most_frequent needs max_ngram = 0, got " +
                                  std::to_string(max_ngram));
    if (max_ngram != 0 && adaptive_factor != 0)
      throw std::invalid_argument("ngram_options.adaptive_factor: needs max_ngram = 0, got " +
                                  std::to_string(max_ngram));
    if (max_ngram != 0 && cache)
      throw std::invalid_argument("ngram_options.cache: needs max_ngram = 0, got " +
                                  std::to_string(max_ngram));
  }
};

}  // namespace specdec
