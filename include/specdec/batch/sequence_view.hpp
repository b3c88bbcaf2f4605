// specdec/batch/sequence_view.hpp - one sequence of a BatchLanguageModel seen as a LanguageModel
// (and a TreeLanguageModel when the batch model scores trees): an append is a call with one
// entry. The batch decoder keeps each sequence's context through one; it also lets the
// single-sequence decoder run on a batch engine (decoding a sequence alone).
#pragma once

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <utility>

#include "specdec/concepts/batch_language_model.hpp"
#include "specdec/concepts/language_model.hpp"
#include "specdec/types.hpp"

namespace specdec {

/**
 * A view of sequence `id` of `model` (not owned: the model must outlive it, and the sequence is
 * neither created nor released by the view). Each call is one call on the batch model, so the
 * costs and errors are the model's. Not thread-safe.
 */
template <BatchLanguageModel Batch>
class sequence_view {
 public:
  sequence_view(Batch& model, sequence_id id) noexcept : model_(&model), id_(id) {}

  std::size_t vocab_size() const { return static_cast<std::size_t>(model_->vocab_size()); }
  std::size_t size() const { return static_cast<std::size_t>(model_->size(id_)); }
  /// The batch model's max_size() (unbounded without one).
  std::size_t max_size() const {
    if constexpr (requires { { model_->max_size() } -> std::convertible_to<std::size_t>; }) {
      return static_cast<std::size_t>(model_->max_size());
    } else {
      return std::numeric_limits<std::size_t>::max();
    }
  }
  /// score() with the one entry {id, tokens, {}, logits}; in several calls of at most
  /// max_batch_tokens() tokens when it has fewer (a long prompt). If a call throws, the sequence
  /// is truncated back to where it was and the exception propagates.
  void append(std::span<const token_id> tokens, std::span<float> logits) {
    const std::size_t limit = std::max<std::size_t>(1, max_batch_tokens_of(*model_));
    const std::size_t v = vocab_size();
    if (tokens.size() <= limit || logits.size() != tokens.size() * v) {
      const batch_entry e{id_, tokens, {}, logits};  // the model refuses bad sizes itself
      model_->score(std::span<const batch_entry>(&e, 1));
      return;
    }
    const std::size_t before = size();
    try {
      for (std::size_t at = 0; at < tokens.size(); at += limit) {
        const std::size_t n = std::min(limit, tokens.size() - at);
        const batch_entry e{id_, tokens.subspan(at, n), {}, logits.subspan(at * v, n * v)};
        model_->score(std::span<const batch_entry>(&e, 1));
      }
    } catch (...) {
      if (size() > before) model_->truncate(id_, before);
      throw;
    }
  }
  /// The batch model's optional prefill(id, tokens) (LanguageModel's prefill: no logits), in
  /// calls of at most max_batch_tokens() tokens. If a call throws, the sequence is truncated back
  /// to where it was and the exception propagates. Without it, specdec::prefill feeds the view
  /// through append in bounded chunks.
  void prefill(std::span<const token_id> tokens)
    requires BatchPrefillLanguageModel<Batch>
  {
    const std::size_t limit = std::max<std::size_t>(1, max_batch_tokens_of(*model_));
    if (tokens.size() <= limit) {
      model_->prefill(id_, tokens);
      return;
    }
    const std::size_t before = size();
    try {
      for (std::size_t at = 0; at < tokens.size(); at += limit)
        model_->prefill(id_, tokens.subspan(at, std::min(limit, tokens.size() - at)));
    } catch (...) {
      if (size() > before) model_->truncate(id_, before);
      throw;
    }
  }
  void truncate(std::size_t n) { model_->truncate(id_, n); }
  /// The tokens the sequence holds, when the batch model can say (an optional member
  /// tokens(id) -> std::span<const token_id>): LanguageModel's optional readback, with which
  /// generate_options::reuse_prefix keeps exactly what the sequence still holds.
  std::span<const token_id> tokens() const
    requires requires(const Batch& b, sequence_id i) {
      { b.tokens(i) } -> std::convertible_to<std::span<const token_id>>;
    }
  {
    return model_->tokens(id_);
  }
  /// score() with the one tree entry {id, tokens, parents, logits}.
  void append_tree(std::span<const token_id> tokens, std::span<const std::int32_t> parents,
                   std::span<float> logits)
    requires BatchTreeLanguageModel<Batch>
  {
    const batch_entry e{id_, tokens, parents, logits};
    model_->score(std::span<const batch_entry>(&e, 1));
  }
  void commit(std::span<const std::int32_t> path)
    requires BatchTreeLanguageModel<Batch>
  {
    model_->commit(id_, path);
  }

  sequence_id id() const noexcept { return id_; }
  Batch& model() const noexcept { return *model_; }

  /// The context a view stands for, (batch model, sequence): two views of one sequence are one
  /// context to the decoders' checks (found by argument-dependent lookup; see check_drafter_for).
  friend std::pair<const void*, std::uint64_t> context_key(const sequence_view& v) noexcept {
    return {static_cast<const void*>(v.model_), static_cast<std::uint64_t>(v.id_)};
  }

 private:
  Batch* model_;
  sequence_id id_;
};

}  // namespace specdec
