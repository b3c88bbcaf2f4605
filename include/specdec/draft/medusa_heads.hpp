// specdec/draft/medusa_heads.hpp - Medusa heads (Cai et al. 2024): the weights and their forward
// pass, from a target's last hidden state to each head's logits.
#pragma once

#include <cmath>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

#include <Eigen/Core>

#include "specdec/detail/draft_heads.hpp"
#include "specdec/types.hpp"

namespace specdec {

/// One head: a residual SiLU block r = x + SiLU(W x + b) on the hidden state x, then a classifier.
struct medusa_head {
  row_matrix w;          ///< d x d
  prob_row b;            ///< d
  row_matrix classifier; ///< V x d of its own, or empty: the target's (shared)
};

/**
 * H heads; head k (0-based) predicts the token k + 2 positions after the hidden state's
 * position: head 0 the token after the target's own next token, and so on.
 *
 * `input_scale` lets heads trained on one scale of hidden state run on a target whose hidden
 * states are a multiple of it (a widened target, see docs/heads.md): the block runs on
 * x = input_scale * hidden, an own classifier reads r, the target's classifier r / input_scale.
 * `rank_accuracy` (optional, H x R) is the measured probability that head k's r-th most likely
 * token is the target's; medusa_drafter chooses sparse trees from it.
 */
struct medusa_weights {
  std::vector<medusa_head> heads;
  float input_scale = 1.0f;
  row_matrix rank_accuracy;

  std::size_t size() const noexcept { return heads.size(); }
};

/// Throws std::invalid_argument naming the field unless every head fits a target of hidden
/// width `d` and vocabulary `v` (and the classifier, when a head shares it, is v x d).
inline void check_medusa_weights(const medusa_weights& m, std::size_t d, std::size_t v,
                                 const weight_view& target_classifier) {
  const auto fail = [](const std::string& what) {
    throw std::invalid_argument("medusa_weights: " + what);
  };
  if (m.heads.empty()) fail("heads is empty");
  if (!(m.input_scale > 0.0f) || !std::isfinite(m.input_scale))
    fail("input_scale must be positive and finite");
  const auto D = static_cast<Eigen::Index>(d), V = static_cast<Eigen::Index>(v);
  for (std::size_t k = 0; k < m.heads.size(); ++k) {
    const medusa_head& h = m.heads[k];
    const std::string at = "heads[" + std::to_string(k) + "].";
    if (h.w.rows() != D || h.w.cols() != D)
      fail(at + "w is " + std::to_string(h.w.rows()) + " x " + std::to_string(h.w.cols()) +
           ", expected the hidden width " + std::to_string(d) + " x " + std::to_string(d));
    if (h.b.size() != D) fail(at + "b has " + std::to_string(h.b.size()) + " entries, expected " +
                              std::to_string(d));
    if (h.classifier.size() == 0) {
      if (target_classifier.rows() != V || target_classifier.cols() != D)
        fail(at + "classifier is empty (shared) but the target's classifier is " +
             std::to_string(target_classifier.rows()) + " x " +
             std::to_string(target_classifier.cols()) + ", expected " + std::to_string(v) +
             " x " + std::to_string(d));
    } else if (h.classifier.rows() != V || h.classifier.cols() != D) {
      fail(at + "classifier is " + std::to_string(h.classifier.rows()) + " x " +
           std::to_string(h.classifier.cols()) + ", expected vocab " + std::to_string(v) + " x " +
           std::to_string(d));
    }
  }
  if (m.rank_accuracy.size() != 0 &&
      m.rank_accuracy.rows() != static_cast<Eigen::Index>(m.heads.size()))
    fail("rank_accuracy has " + std::to_string(m.rank_accuracy.rows()) +
         " rows, expected one per head (" + std::to_string(m.heads.size()) + ")");
}

/**
 * Head `k`'s block for one hidden row: `r` = x + SiLU(W x + b) with x = input_scale * hidden,
 * the row its own classifier reads (the target's reads r / input_scale). O(d^2). Allocates
 * nothing once `r` has its size (d).
 */
inline void medusa_block(const medusa_weights& m, std::size_t k,
                         const Eigen::Ref<const prob_row>& hidden, prob_row& r) {
  const medusa_head& h = m.heads[k];
  // x = input_scale * hidden stays an expression: no temporary row.
  r.noalias() = (m.input_scale * hidden) * h.w.transpose();
  r += h.b;
  detail::silu_in_place(r);
  r += m.input_scale * hidden;
}

/**
 * Head `k`'s logits for one hidden row: `out` = classifier x medusa_block(hidden). O(d^2 + V d);
 * `r` is scratch. Allocates nothing once `r` and `out` have their sizes (d and V).
 */
inline void medusa_logits(const medusa_weights& m, std::size_t k,
                          const Eigen::Ref<const prob_row>& hidden,
                          const weight_view& target_classifier, prob_row& r, prob_row& out) {
  const medusa_head& h = m.heads[k];
  medusa_block(m, k, hidden, r);
  if (h.classifier.size() != 0) {
    out.noalias() = r * h.classifier.transpose();
  } else {
    r /= m.input_scale;
    out.noalias() = r * target_classifier.transpose();
  }
}

}  // namespace specdec
