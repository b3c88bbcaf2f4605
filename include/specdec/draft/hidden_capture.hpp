// specdec/draft/hidden_capture.hpp - a target adapter that keeps the hidden rows of the committed
// context, so that draft heads can read them without an extra target call.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "specdec/concepts/hidden_state_model.hpp"
#include "specdec/concepts/language_model.hpp"
#include "specdec/types.hpp"

namespace specdec {

/**
 * Wraps a HiddenStateModel as a plain LanguageModel (and TreeLanguageModel when the model is a
 * HiddenStateTreeModel) for the decoder: every append / append_tree asks the model for the hidden
 * rows as well, and the capture keeps those of the committed positions (truncate drops them,
 * commit keeps the accepted path's). A heads drafter reads `hidden(size() - 1)`: the row of the
 * last committed position, written by the call that verified the last draft.
 *
 * Memory: size() x hidden_size() floats, plus one tree's rows while a tree is pending. Appends
 * cost one copy of nothing (rows are written in place); commit copies the path's rows.
 * Not thread-safe; the model must outlive the capture. Use the model only through the capture
 * while it is in use (the capture notices a different size and then reports no rows).
 */
template <class Model>
class hidden_capture {
  static_assert(detail::check_hidden_state_model<Model>());

 public:
  /// Positions the model already holds have no rows (hidden() is empty for them).
  explicit hidden_capture(Model& model) : model_(model) { resync(); }

  Model& model() noexcept { return model_; }
  std::size_t vocab_size() const { return static_cast<std::size_t>(model_.vocab_size()); }
  std::size_t size() const { return static_cast<std::size_t>(model_.size()); }
  std::size_t max_size() const { return max_size_of(model_); }
  std::size_t hidden_size() const { return static_cast<std::size_t>(model_.hidden_size()); }

  /// The committed tokens whose hidden rows are held (in lockstep with the model's context).
  std::span<const token_id> tokens() const noexcept { return tokens_; }

  /// True when the rows held describe the model's context (nobody used the model behind the
  /// capture's back since the last call through it).
  bool in_sync() const { return tokens_.size() == size(); }

  /// The hidden row of committed position `position` (< size()), or an empty span when it is
  /// unknown (the position was filled behind the capture's back, or the capture is out of sync).
  std::span<const float> hidden(std::size_t position) const {
    const std::size_t d = hidden_size();
    if (!in_sync() || position >= tokens_.size() || position < unknown_) return {};
    return std::span<const float>(rows_.data() + position * d, d);
  }

  /// Room for the tokens and hidden rows of a context of n positions, so that appends and
  /// commits up to n allocate nothing (the heads drafters pass on the decoder's reserve: n is the
  /// prompt plus max_new_tokens within max_size()). n x hidden_size() floats; O(n d) once.
  void reserve(std::size_t n) {
    tokens_.reserve(n);
    if (rows_.size() < n * hidden_size()) rows_.resize(n * hidden_size());
  }

  /// LanguageModel::append; the model's hidden rows go straight into the store.
  void append(std::span<const token_id> tokens, std::span<float> logits) {
    const std::size_t d = hidden_size(), at = size();
    if (!in_sync()) resync();
    if (rows_.size() < (at + tokens.size()) * d)
      rows_.resize(std::max((at + tokens.size()) * d, 2 * rows_.size()));
    model_.append(tokens, logits, std::span<float>(rows_.data() + at * d, tokens.size() * d));
    tokens_.insert(tokens_.end(), tokens.begin(), tokens.end());
  }

  /// LanguageModel's optional prefill: append without logits, the hidden rows kept as append
  /// keeps them. Uses the model's prefill(tokens, hidden) when it has one, else appends in
  /// chunks of at most prefill_chunk_tokens(V) tokens into a scratch kept for the next call
  /// (bounded memory; a chunk that throws leaves the context as it was before the call).
  void prefill(std::span<const token_id> tokens) {
    const std::size_t d = hidden_size(), at = size();
    if (tokens.empty()) return;
    if (!in_sync()) resync();
    if (rows_.size() < (at + tokens.size()) * d)
      rows_.resize(std::max((at + tokens.size()) * d, 2 * rows_.size()));
    if constexpr (requires(std::span<float> h) { model_.prefill(tokens, h); }) {
      model_.prefill(tokens, std::span<float>(rows_.data() + at * d, tokens.size() * d));
    } else {
      const std::size_t v = vocab_size(), chunk = prefill_chunk_tokens(v);
      if (scratch_.size() < std::min(chunk, tokens.size()) * v)
        scratch_.resize(std::min(chunk, tokens.size()) * v);
      try {
        for (std::size_t i = 0; i < tokens.size(); i += chunk) {
          const std::size_t n = std::min(chunk, tokens.size() - i);
          model_.append(tokens.subspan(i, n), std::span<float>(scratch_.data(), n * v),
                        std::span<float>(rows_.data() + (at + i) * d, n * d));
        }
      } catch (...) {
        if (size() > at) model_.truncate(at);
        throw;
      }
    }
    tokens_.insert(tokens_.end(), tokens.begin(), tokens.end());
  }

  void truncate(std::size_t n) {
    model_.truncate(n);
    if (tokens_.size() > n) tokens_.resize(n);
    unknown_ = std::min(unknown_, n);
    pending_.clear();
  }

  /// TreeLanguageModel::append_tree (when the model has tree attention with hidden rows).
  void append_tree(std::span<const token_id> tokens, std::span<const std::int32_t> parents,
                   std::span<float> logits)
    requires HiddenStateTreeModel<Model>
  {
    if (!in_sync()) resync();
    tree_rows_.resize(tokens.size() * hidden_size());
    model_.append_tree(tokens, parents, logits, std::span<float>(tree_rows_));
    pending_.assign(tokens.begin(), tokens.end());
  }

  /// TreeLanguageModel::commit: keeps the path's hidden rows.
  void commit(std::span<const std::int32_t> path)
    requires HiddenStateTreeModel<Model>
  {
    const std::size_t d = hidden_size(), at = size();
    model_.commit(path);  // validates the path; throws => nothing changed
    if (rows_.size() < (at + path.size()) * d)
      rows_.resize(std::max((at + path.size()) * d, 2 * rows_.size()));
    for (std::size_t k = 0; k < path.size(); ++k) {
      const auto node = static_cast<std::size_t>(path[k]);
      std::copy_n(tree_rows_.data() + node * d, d, rows_.data() + (at + k) * d);
      tokens_.push_back(pending_.at(node));
    }
    pending_.clear();
  }

 private:
  // The model was used behind our back: what we hold no longer describes it. Every position it
  // holds becomes unknown (no row, token -1) until truncated away.
  void resync() {
    tokens_.assign(size(), -1);
    unknown_ = tokens_.size();
    if (rows_.size() < tokens_.size() * hidden_size()) rows_.resize(tokens_.size() * hidden_size());
  }

  Model& model_;
  std::vector<float> rows_;       // committed positions x d
  std::vector<token_id> tokens_;  // committed tokens
  std::vector<float> tree_rows_;  // pending tree nodes x d
  std::vector<float> scratch_;    // prefill's logits for a model without prefill: chunk x V
  std::vector<token_id> pending_;
  std::size_t unknown_ = 0;  // positions [0, unknown_) have no known row
};

}  // namespace specdec
