// specdec/verify/block.hpp - block verification: a chain of drafts judged jointly (Sun et al.,
// "Block Verification Accelerates Speculative Decoding", ICLR 2025).
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <cstddef>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "specdec/math/rng.hpp"
#include "specdec/math/sample.hpp"
#include "specdec/math/sampling_params.hpp"
#include "specdec/math/warp.hpp"
#include "specdec/types.hpp"
#include "specdec/verify/greedy.hpp"
#include "specdec/verify/rejection.hpp"
#include "specdec/verify/result.hpp"
#include "specdec/verify/row_hook.hpp"

namespace specdec {

/// Scratch memory for verify_block, reused across calls. Not thread-safe.
struct block_workspace {
  std::vector<float> row_a, row_b;  // warped target rows: the latest and the best stop so far
  std::vector<float> residual;
  warp_workspace warp;
  rejection_workspace rejection;  // one-hot drafts are verified token by token (see below)
};

/**
 * Block verification of a chain of drafts: the same inputs and the same guarantee as
 * verify_rejection (the emitted tokens are distributed exactly as sampling the warped target
 * alone), and never fewer accepted drafts in expectation. The draft block is judged as a whole:
 * a draft that token-wise verification would reject can still be kept when the drafts before it
 * were under-proposed by q (p > q), because the verdict for each prefix weighs the whole block.
 *
 * - `target`: drafts.size() + 1 rows of target logits (row i: after the context and drafts[0..i)).
 * - `q`: the distributions the drafts were drawn from, one row per draft, already warped; or no
 *   rows, meaning each draft is a deterministic one-hot proposal.
 *
 * The rule, for drafts x_1..x_n (p_i, q_i the warped target and draft rows at draft i's position):
 * a weight w_0 = 1, w_i = min(1, w_{i-1} p_i(x_i) / q_i(x_i)); for i < n the stop score
 * h_i = r_i / (r_i + 1 - w_i) with r_i = sum_y max(0, w_i p_{i+1}(y) - q_{i+1}(y)), and h_n = w_n.
 * One uniform draw per i; the kept length is the last i whose draw falls below h_i (0 if none).
 * `next` is drawn from norm(max(0, w_k p_{k+1} - q_{k+1})) for a kept length k < n, however
 * small its mass (from p_{k+1} only if the mass is 0, which exact arithmetic rules out: a stop
 * at k < n has r_k > 0, and stopping at 0 with an empty residual needs p_1 <= q_1 everywhere),
 * or from the last row when all n drafts are kept. Once a weight is 0 no later prefix can be kept and the scan stops.
 *
 * One-hot drafts: token-wise verification already keeps the longest prefix any lossless verifier
 * can keep (a prefix is emitted with at most the target's probability of it), so block
 * verification coincides with it in distribution and this calls verify_rejection. With
 * sp.temperature == 0 it is verify_greedy.
 *
 * Cost: every row read is turned into a full row of p (r_i needs it): with temperature alone a
 * max pass and an exp pass, otherwise a warp; plus one pass over q's row, and the last row once
 * more when every draft is kept. Token-wise verification reads p(x) alone on its fast paths. Throws
 * std::invalid_argument for a draft token outside [0, V), for q(x) = 0, or for mismatched shapes;
 * std::domain_error for NaN or +inf logits. Rows past the scan's end (a weight of 0) are not
 * read; `on_read(i)` is called before row i is first read (row_hook.hpp).
 */
template <class RowHook = no_row_hook>
verify_result verify_block(logits_view target, std::span<const token_id> drafts, logits_view q,
                           const sampling_params& sp, rng& gen, block_workspace& ws,
                           RowHook&& on_read = {}) {
  const std::size_t n = drafts.size();
  const std::size_t v = static_cast<std::size_t>(target.cols());
  if (static_cast<std::size_t>(target.rows()) != n + 1)
    throw std::invalid_argument(
        "verify_block: target must have drafts.size() + 1 = " + std::to_string(n + 1) +
        " rows, has " + std::to_string(target.rows()));
  const bool one_hot = q.rows() == 0;
  if (!one_hot && (static_cast<std::size_t>(q.rows()) != n || q.cols() != target.cols()))
    throw std::invalid_argument(
        "verify_block: q must have drafts.size() rows of vocab_size columns (or none)");
  for (std::size_t i = 0; i < n; ++i)
    if (drafts[i] < 0 || static_cast<std::size_t>(drafts[i]) >= v)
      throw std::invalid_argument("verify_block: drafts[" + std::to_string(i) +
                                  "] = " + std::to_string(drafts[i]) +
                                  " is outside the vocabulary [0, " + std::to_string(v) + ")");
  if (sp.greedy()) return verify_greedy(target, drafts, on_read);
  ws.rejection.reserve(v);  // sized on the first call, though used for one-hot drafts only
  if (one_hot) return verify_rejection(target, drafts, q, sp, gen, ws.rejection, on_read);
  ws.warp.reserve(v);
  for (std::size_t i = 0; i < n; ++i)
    if (!(q(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(drafts[i])) > 0.0f))
      throw std::invalid_argument("verify_block: q(" + std::to_string(i) + ", " +
                                  std::to_string(drafts[i]) +
                                  ") = 0: a draft token must have been drawn from its q row");

  auto target_row = [&](std::size_t i) {
    return std::span<const float>(target.row(static_cast<Eigen::Index>(i)).data(), v);
  };
  auto q_row = [&](std::size_t i) {
    return std::span<const float>(q.row(static_cast<Eigen::Index>(i)).data(), v);
  };
  ws.row_a.resize(v);
  ws.row_b.resize(v);
  ws.residual.resize(v);
  // With temperature alone a row is kept as its exp weights e and 1 / sum(e) (p = e / sum, one
  // pass fewer than warp's normalisation); otherwise as warp's p with a scale of 1.
  const bool temperature_only =
      (sp.top_k == 0 || sp.top_k >= v) && !(sp.top_p < 1.0f) && !(sp.min_p > 0.0f);
  const float inv_t = 1.0f / sp.temperature;
  const auto load = [&](std::size_t i, std::vector<float>& out) -> double {
    on_read(i);  // each row is loaded once
    const auto logits = target_row(i);
    if (!temperature_only) {
      warp(logits, sp, out, ws.warp);
      return 1.0;
    }
    bool masked = false;
    const float m = checked_max(logits, &masked);
    const double total =
        masked ? detail::exp_blocks<true>(logits.data(), v, m, inv_t, out.data(), nullptr)
               : detail::exp_blocks<false>(logits.data(), v, m, inv_t, out.data(), nullptr);
    return 1.0 / total;
  };
  // `latest` holds the target row of the position being scanned; `best` the row after the kept
  // prefix (the row `next` is drawn from). They share a buffer while the latest prefix is the
  // kept one; a new row is written into the buffer `best` does not use.
  std::vector<float>* best = &ws.row_a;
  std::vector<float>* latest = &ws.row_a;
  double latest_scale = load(0, *latest), best_scale = latest_scale;

  std::size_t kept = 0;
  double weight = 1.0, kept_weight = 1.0;
  for (std::size_t i = 1; i <= n; ++i) {
    const auto x = static_cast<std::size_t>(drafts[i - 1]);
    const double px = (*latest)[x] * latest_scale;
    const double qx = q(static_cast<Eigen::Index>(i - 1), static_cast<Eigen::Index>(x));
    weight = std::min(1.0, weight * px / qx);
    if (!(weight > 0.0)) break;  // no prefix through x_i can be kept: all later h are 0
    double h = weight;           // h_n
    if (i < n) {
      std::vector<float>* next_row = best == &ws.row_a ? &ws.row_b : &ws.row_a;
      latest_scale = load(i, *next_row);
      latest = next_row;
      // r_i: float lanes within blocks of detail::block values, the block sums added in double
      // (the rounding of a lane sum stays near float's own, as in sample()).
      const auto qi = q_row(i);
      const auto scale = static_cast<float>(weight * latest_scale);
      double r = 0.0;
      for (std::size_t b = 0; b < v; b += detail::block) {
        const auto len = static_cast<Eigen::Index>(std::min(detail::block, v - b));
        const Eigen::Map<const Eigen::ArrayXf> pa(latest->data() + b, len), qa(qi.data() + b, len);
        r += static_cast<double>((scale * pa - qa).max(0.0f).sum());
      }
      h = r > 0.0 ? r / (r + (1.0 - weight)) : 0.0;
    }
    if (gen.uniform_open() < h) {
      kept = i;
      kept_weight = weight;
      best = latest;
      best_scale = latest_scale;
    }
  }
  if (kept == n) {  // the bonus token: sample() takes unnormalised weights
    load(n, ws.residual);
    return {n, sample(ws.residual, gen)};
  }
  const auto qk = q_row(kept);
  const auto& p = *best;
  Eigen::Map<Eigen::ArrayXf>(ws.residual.data(), static_cast<Eigen::Index>(v)) =
      (static_cast<float>(kept_weight * best_scale) *
           Eigen::Map<const Eigen::ArrayXf>(p.data(), static_cast<Eigen::Index>(v)) -
       Eigen::Map<const Eigen::ArrayXf>(qk.data(), static_cast<Eigen::Index>(v)))
          .max(0.0f);
  if (detail::block_sums(ws.residual, nullptr) > 0.0) return {kept, sample(ws.residual, gen)};
  return {kept, sample(p, gen)};  // empty: only reachable by rounding (see the comment above)
}

/// verify_block with a temporary workspace.
inline verify_result verify_block(logits_view target, std::span<const token_id> drafts,
                                  logits_view q, const sampling_params& sp, rng& gen) {
  block_workspace ws;
  return verify_block(target, drafts, q, sp, gen, ws);
}

}  // namespace specdec
