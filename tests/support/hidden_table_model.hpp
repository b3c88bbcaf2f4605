// tests/support/hidden_table_model.hpp - a table_model that is also a HiddenStateModel: its
// hidden row is its logits row and its classifier the identity (V x V), so draft heads can run on
// it and its law stays exactly enumerable (exact_joint on the table model).
#pragma once

#include <cmath>
#include <cstddef>
#include <limits>
#include <span>
#include <stdexcept>

#include <specdec/types.hpp>

#include "support/table_model.hpp"

namespace specdec::test {

class hidden_table_model : public table_model {
 public:
  explicit hidden_table_model(table_model_options o = {})
      : table_model(o), classifier_(row_matrix::Identity(static_cast<Eigen::Index>(o.vocab_size),
                                                         static_cast<Eigen::Index>(o.vocab_size))) {}

  std::size_t hidden_size() const noexcept { return vocab_size(); }
  using table_model::append;
  void append(std::span<const token_id> tokens, std::span<float> logits, std::span<float> hidden) {
    if (hidden.size() != tokens.size() * vocab_size())
      throw std::invalid_argument("hidden_table_model::append: hidden.size() must be n * V");
    append(tokens, logits);
    std::copy(logits.begin(), logits.end(), hidden.begin());
    // A poisoned position (for the bad-input tests).
    for (std::size_t i = 0; i < tokens.size(); ++i)
      if (size() - tokens.size() + i == nan_at)
        hidden[i * vocab_size()] = std::numeric_limits<float>::quiet_NaN();
  }
  /// The classifier: hidden row -> logits (identity).
  const row_matrix& classifier() const noexcept { return classifier_; }

  std::size_t nan_at = std::numeric_limits<std::size_t>::max();

 private:
  row_matrix classifier_;
};

}  // namespace specdec::test
