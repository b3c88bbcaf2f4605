// specdec/types.hpp - vocabulary types shared by every layer of the library.
#pragma once

#include <cstddef>
#include <cstdint>

#include <Eigen/Core>

namespace specdec {

/// A token id. Valid ids of a model are [0, vocab_size).
using token_id = std::int32_t;

/// A row-major matrix of floats: one row of logits or probabilities per position.
using row_matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

/// A read-only view of n rows of V logits laid out row-major (the layout `append` writes).
using logits_view = Eigen::Map<const row_matrix>;

/// One dense probability (or logit) row.
using prob_row = Eigen::Matrix<float, 1, Eigen::Dynamic>;

}  // namespace specdec
