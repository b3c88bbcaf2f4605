// specdec/draft/eagle_head.hpp - an EAGLE-style feature predictor (Li et al. 2024): from the
// target's hidden state at one position and the embedding of the next token, the hidden state at
// the next position, which the target's own classifier turns into a token.
#pragma once

#include <cmath>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

#include <Eigen/Core>

#include "specdec/detail/draft_heads.hpp"
#include "specdec/detail/weight_product.hpp"
#include "specdec/draft/draft_threads.hpp"
#include "specdec/draft/eagle_attention.hpp"
#include "specdec/types.hpp"

namespace specdec {

/**
 * An MLP on the concatenation [f, e] of a hidden state f (width d) and the next token's
 * embedding e (width d), with a residual on f:
 *
 *     f_next = f + W2 SiLU(W1 [f, e] + b1) + b2        (W1: m x 2d, W2: d x m)
 *
 * plus, optionally, one causal attention layer over the inputs of the earlier positions
 * (`attention`, see eagle_attention). It runs on f = input_scale * hidden (see medusa_weights
 * for why) and hands the classifier f_next / input_scale. `depth_accuracy` (optional) is the
 * measured top-1 agreement with the target at each drafted depth, for the record.
 */
struct eagle_weights {
  row_matrix w1;  ///< m x 2d: columns [0, d) read f, [d, 2d) read e
  prob_row b1;    ///< m
  row_matrix w2;  ///< d x m
  prob_row b2;    ///< d
  float input_scale = 1.0f;
  std::vector<float> depth_accuracy;
  eagle_attention attention;  ///< heads == 0: the MLP alone

  std::size_t inner() const noexcept { return static_cast<std::size_t>(w1.rows()); }
};

/// Throws std::invalid_argument naming the field unless the weights fit hidden width `d`.
inline void check_eagle_weights(const eagle_weights& e, std::size_t d) {
  const auto fail = [](const std::string& what) {
    throw std::invalid_argument("eagle_weights: " + what);
  };
  const auto D = static_cast<Eigen::Index>(d), m = e.w1.rows();
  if (m == 0) fail("w1 is empty");
  if (e.w1.cols() != 2 * D)
    fail("w1 has " + std::to_string(e.w1.cols()) + " columns, expected 2 x hidden width = " +
         std::to_string(2 * d));
  if (e.b1.size() != m) fail("b1 has " + std::to_string(e.b1.size()) + " entries, expected " +
                             std::to_string(m));
  if (e.w2.rows() != D || e.w2.cols() != m)
    fail("w2 is " + std::to_string(e.w2.rows()) + " x " + std::to_string(e.w2.cols()) +
         ", expected " + std::to_string(d) + " x " + std::to_string(m));
  if (e.b2.size() != D) fail("b2 has " + std::to_string(e.b2.size()) + " entries, expected " +
                             std::to_string(d));
  if (!(e.input_scale > 0.0f) || !std::isfinite(e.input_scale))
    fail("input_scale must be positive and finite");
  check_eagle_attention(e.attention, d);
}

/**
 * The MLP part of one step for n rows at once (the attention layer, when there is one, needs the
 * sequence and is added by eagle_drafter): `next` (n x d) from features `f` (n x d, already
 * multiplied by input_scale) and embeddings `e` (n x d). O(n (2d m + d m)), each weight read once
 * for the n rows (detail::times_weights), split over `threads` when lent; `z` is scratch.
 * This form writes rows the caller sized (z: n x m, next: n x d), for instance the top rows of
 * buffers kept at their largest, and allocates nothing.
 */
inline void eagle_step(const eagle_weights& w, const Eigen::Ref<const row_matrix>& f,
                       const Eigen::Ref<const row_matrix>& e, Eigen::Ref<row_matrix> z,
                       Eigen::Ref<row_matrix> next, const draft_threads& threads = {}) {
  const Eigen::Index d = f.cols();
  detail::times_weights(f, w.w1.leftCols(d), z, false, threads);
  detail::times_weights(e, w.w1.rightCols(d), z, true, threads);
  z.rowwise() += w.b1;
  detail::silu_in_place(z);
  next = f;
  detail::times_weights(z, w.w2, next, true, threads);
  next.rowwise() += w.b2;
}

/// eagle_step into z and next resized to n rows (allocates when their sizes change).
inline void eagle_step(const eagle_weights& w, const Eigen::Ref<const row_matrix>& f,
                       const Eigen::Ref<const row_matrix>& e, row_matrix& z, row_matrix& next) {
  z.resize(f.rows(), w.w1.rows());
  next.resize(f.rows(), f.cols());
  eagle_step(w, f, e, Eigen::Ref<row_matrix>(z), Eigen::Ref<row_matrix>(next));
}

}  // namespace specdec
