// tests/support/prefill_models.hpp - the test models with and without the optional prefill, each
// recording its calls: a table_model with prefill (optionally broken: it forgets the last token),
// a table_model that records the largest logits span it is handed, and a batch_table_model with
// prefill(id, tokens).
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>
#include <vector>

#include <specdec/types.hpp>

#include "support/batch_table_model.hpp"
#include "support/table_model.hpp"

namespace specdec::test {

/// A table_model that records the rows of every append (largest_rows) and the calls.
class recording_table_model : public table_model {
 public:
  using table_model::table_model;
  void append(std::span<const token_id> tokens, std::span<float> logits) {
    table_model::append(tokens, logits);
    ++appends;
    largest_rows = std::max(largest_rows, tokens.size());
  }
  std::size_t appends = 0, largest_rows = 0;
};

/// recording_table_model with prefill(tokens): the same context as append, no logits written
/// (counted in prefills and prefilled). `forget_last` breaks it: the last token is not fed.
class prefill_table_model : public recording_table_model {
 public:
  using recording_table_model::recording_table_model;
  void prefill(std::span<const token_id> tokens) {
    if (tokens.empty()) throw std::invalid_argument("prefill_table_model::prefill: tokens is empty");
    const std::span<const token_id> fed = forget_last && tokens.size() > 1 ? tokens.first(tokens.size() - 1) : tokens;
    scratch_.resize(fed.size() * vocab_size());
    table_model::append(fed, std::span<float>(scratch_));  // validates; recording not counted
    ++prefills;
    prefilled += tokens.size();
  }
  bool forget_last = false;
  std::size_t prefills = 0, prefilled = 0;

 private:
  std::vector<float> scratch_;
};

/// batch_table_model with prefill(id, tokens) (a chain entry without logits), counted; score
/// records its largest entry.
class prefill_batch_table_model : public batch_table_model {
 public:
  using batch_table_model::batch_table_model;
  void score(std::span<const batch_entry> batch) {
    for (const batch_entry& e : batch) largest_rows = std::max(largest_rows, e.tokens.size());
    batch_table_model::score(batch);
  }
  void prefill(sequence_id id, std::span<const token_id> tokens) {
    scratch_.resize(tokens.size() * vocab_size());
    const batch_entry e{id, tokens, {}, std::span<float>(scratch_)};
    batch_table_model::score(std::span<const batch_entry>(&e, 1));
    ++prefills;
    prefilled += tokens.size();
  }
  std::size_t prefills = 0, prefilled = 0, largest_rows = 0;

 private:
  std::vector<float> scratch_;
};

}  // namespace specdec::test
