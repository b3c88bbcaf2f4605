// specdec/draft/composed_drafter.hpp - prompt lookup first, a draft model only when the lookup has
// nothing worth verifying.
#pragma once

#include <cstddef>
#include <span>
#include <stdexcept>
#include <string>

#include "specdec/concepts/drafter.hpp"
#include "specdec/math/rng.hpp"
#include "specdec/math/sampling_params.hpp"
#include "specdec/types.hpp"

namespace specdec {

/// Settings of composed_drafter.
struct composed_options {
  /// A lookup draft shorter than this (after the k cap) is discarded and the fallback drafts
  /// instead; >= 1 (1: use any non-empty lookup draft).
  std::size_t min_lookup_tokens = 1;

  void validate() const {
    if (min_lookup_tokens < 1)
      throw std::invalid_argument("composed_options.min_lookup_tokens: must be >= 1, got " +
                                  std::to_string(min_lookup_tokens));
  }
};

/**
 * Asks `Lookup` (typically ngram_drafter: free, deterministic) first and `Fallback` (typically
 * model_drafter: costs a draft-model call per token) only when the lookup proposes fewer than
 * min_lookup_tokens tokens, as llama.cpp mixes its draftless modes with a draft model. Each step's
 * draft comes whole from one of them, with that drafter's q rows (none for the lookup), so
 * verification stays exact: greedy output equals plain greedy decoding and sampling is lossless.
 * Models specdec::Drafter. accept() and reset() reach both drafters; a drafter skipped on a step
 * resynchronises from the history on its next propose (both library drafters do). Its parts are
 * visible through for_each_part, so the decoders check them as they check a drafter alone
 * (vocabulary, a draft model that is the target, a draft model shared by both parts).
 * Holds references: both drafters must outlive it. Not thread-safe.
 */
template <class Lookup, class Fallback>
class composed_drafter {
 public:
  /// Throws std::invalid_argument when `options` is invalid.
  composed_drafter(Lookup& lookup, Fallback& fallback, composed_options options = {})
      : lookup_(lookup), fallback_(fallback), options_(options) {
    static_assert(Drafter<Lookup> && Drafter<Fallback>,
                  "specdec::composed_drafter: both parts must model specdec::Drafter");
    options_.validate();
  }

  /// specdec::Drafter: the lookup's draft if it has at least min_lookup_tokens tokens, else the
  /// fallback's. Cost: the lookup's, plus the fallback's on the steps it drafts.
  void propose(std::span<const token_id> history, std::size_t k, const sampling_params& sp, rng& g,
               draft& out) {
    out.clear();
    if (k == 0) return;
    lookup_.propose(history, k, sp, g, out);
    if (out.size() >= options_.min_lookup_tokens) {
      ++lookup_steps_;
      return;
    }
    out.clear();
    fallback_.propose(history, k, sp, g, out);
    ++fallback_steps_;
  }

  void accept(std::span<const token_id> committed) {
    lookup_.accept(committed);
    fallback_.accept(committed);
  }

  void reset() {
    lookup_.reset();
    fallback_.reset();
  }

  /// Drafter's optional reserve, passed on to each part that has one.
  void reserve(std::size_t n) {
    if constexpr (requires { lookup_.reserve(n); }) lookup_.reserve(n);
    if constexpr (requires { fallback_.reserve(n); }) fallback_.reserve(n);
  }

  /// The optional Drafter member by which the decoders' checks reach the parts: calls
  /// f(lookup) then f(fallback).
  template <class F>
  void for_each_part(F&& f) {
    f(lookup_);
    f(fallback_);
  }

  /// The draft-model calls of both parts, for those that count them
  /// (decode_stats::draft_model_calls); present when at least one part counts.
  std::size_t model_calls() const
    requires(requires(const Lookup& l) { l.model_calls(); } ||
             requires(const Fallback& f) { f.model_calls(); })
  {
    return calls_of(lookup_) + calls_of(fallback_);
  }

  /// Steps drafted by each part since construction (for statistics).
  std::size_t lookup_steps() const noexcept { return lookup_steps_; }
  std::size_t fallback_steps() const noexcept { return fallback_steps_; }

 private:
  template <class D>
  static std::size_t calls_of(const D& d) {
    if constexpr (requires { d.model_calls(); }) {
      return static_cast<std::size_t>(d.model_calls());
    } else {
      return 0;
    }
  }

  Lookup& lookup_;
  Fallback& fallback_;
  composed_options options_;
  std::size_t lookup_steps_ = 0, fallback_steps_ = 0;
};

}  // namespace specdec
