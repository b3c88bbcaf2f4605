// tests/support/batch_table_model.hpp - a BatchTreeLanguageModel for tests: one tree_table_model
// per sequence, every entry of a call checked before any is applied (so a refused call changes
// nothing), limits on sequences and rows per call, calls counted, and a poison switch that makes
// one sequence's rows NaN.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include <specdec/concepts/batch_language_model.hpp>

#include "support/tree_table_model.hpp"

namespace specdec::test {

struct batch_table_options {
  table_model_options model;  ///< every sequence's table (the same function for all)
  std::size_t max_sequences = std::numeric_limits<std::size_t>::max();
  std::size_t max_batch_tokens = std::numeric_limits<std::size_t>::max();
};

class batch_table_model {
 public:
  explicit batch_table_model(batch_table_options o = {}) : o_(o) {}

  std::size_t vocab_size() const noexcept { return o_.model.vocab_size; }
  std::size_t max_size() const noexcept { return o_.model.max_size; }
  std::size_t max_sequences() const noexcept { return o_.max_sequences; }
  std::size_t max_batch_tokens() const noexcept { return o_.max_batch_tokens; }

  sequence_id create_sequence() {
    if (seqs_.size() >= o_.max_sequences)
      throw std::length_error("batch_table_model: at most " + std::to_string(o_.max_sequences) +
                              " sequences");
    const sequence_id id = next_id_++;
    seqs_.emplace(id, tree_table_model(o_.model));
    return id;
  }
  void release_sequence(sequence_id id) { seqs_.erase(at(id, "release_sequence")); }
  std::size_t size(sequence_id id) const { return find(id, "size").size(); }

  void score(std::span<const batch_entry> batch) {
    const std::size_t v = vocab_size();
    std::size_t rows = 0;
    for (std::size_t i = 0; i < batch.size(); ++i) {
      const batch_entry& e = batch[i];
      const tree_table_model& m = find(e.sequence, "score");
      for (std::size_t j = 0; j < i; ++j)
        if (batch[j].sequence == e.sequence)
          throw std::invalid_argument("batch_table_model::score: sequence " +
                                      std::to_string(e.sequence) + " twice in one call");
      if (e.tokens.empty() || e.logits.size() != e.tokens.size() * v ||
          (!e.parents.empty() && e.parents.size() != e.tokens.size()))
        throw std::invalid_argument("batch_table_model::score: entry sizes");
      for (token_id t : e.tokens)
        if (t < 0 || static_cast<std::size_t>(t) >= v)
          throw std::out_of_range("batch_table_model::score: sequence " +
                                  std::to_string(e.sequence) + ": token " + std::to_string(t) +
                                  " outside the vocabulary");
      if (m.size() + e.tokens.size() > max_size())
        throw std::length_error("batch_table_model::score: context past max_size");
      if (refused_.count(e.sequence))
        throw std::runtime_error("batch_table_model::score: sequence " +
                                 std::to_string(e.sequence) + " is refused (test switch)");
      rows += e.tokens.size();
    }
    if (rows > o_.max_batch_tokens)
      throw std::length_error("batch_table_model::score: " + std::to_string(rows) +
                              " rows exceed max_batch_tokens " +
                              std::to_string(o_.max_batch_tokens));
    ++score_calls_;
    scored_rows_ += rows;
    max_rows_seen_ = std::max(max_rows_seen_, rows);
    for (const batch_entry& e : batch) {
      tree_table_model& m = seqs_.at(e.sequence);
      if (e.parents.empty()) {
        m.append(e.tokens, e.logits);
      } else {
        m.append_tree(e.tokens, e.parents, e.logits);
      }
      if (poisoned_.count(e.sequence))
        std::fill(e.logits.begin(), e.logits.end(), std::numeric_limits<float>::quiet_NaN());
    }
  }
  void truncate(sequence_id id, std::size_t n) { at(id, "truncate")->second.truncate(n); }
  void commit(sequence_id id, std::span<const std::int32_t> path) {
    at(id, "commit")->second.commit(path);
  }

  /// From now on sequence `id` scores NaN rows.
  void poison(sequence_id id) { poisoned_[id] = true; }
  /// From now on a call with an entry of sequence `id` throws (and changes nothing).
  void refuse(sequence_id id) { refused_[id] = true; }
  std::size_t score_calls() const noexcept { return score_calls_; }
  std::size_t scored_rows() const noexcept { return scored_rows_; }
  std::size_t max_rows_seen() const noexcept { return max_rows_seen_; }
  std::size_t live() const noexcept { return seqs_.size(); }
  std::span<const token_id> tokens(sequence_id id) const { return find(id, "tokens").tokens(); }

 private:
  std::map<sequence_id, tree_table_model>::iterator at(sequence_id id, const char* who) {
    const auto it = seqs_.find(id);
    if (it == seqs_.end())
      throw std::invalid_argument(std::string("batch_table_model::") + who + ": unknown sequence " +
                                  std::to_string(id));
    return it;
  }
  const tree_table_model& find(sequence_id id, const char* who) const {
    const auto it = seqs_.find(id);
    if (it == seqs_.end())
      throw std::invalid_argument(std::string("batch_table_model::") + who + ": unknown sequence " +
                                  std::to_string(id));
    return it->second;
  }

  batch_table_options o_;
  std::map<sequence_id, tree_table_model> seqs_;
  std::map<sequence_id, bool> poisoned_, refused_;
  sequence_id next_id_ = 1;
  std::size_t score_calls_ = 0, scored_rows_ = 0, max_rows_seen_ = 0;
};

static_assert(BatchTreeLanguageModel<batch_table_model>);

}  // namespace specdec::test
