// specdec/verify/rejection.hpp - lossless speculative sampling (Leviathan et al.; Chen et al. 2023).
#pragma once

#include <cstddef>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "specdec/math/rng.hpp"
#include "specdec/math/sample.hpp"
#include "specdec/math/sampling_params.hpp"
#include "specdec/math/warp.hpp"
#include "specdec/types.hpp"
#include "specdec/verify/greedy.hpp"
#include "specdec/verify/result.hpp"

namespace specdec {

/// Scratch memory for verify_rejection, reused across calls. Not thread-safe.
struct rejection_workspace {
  std::vector<float> p;
  std::vector<float> residual;
  warp_workspace warp;
};

/**
 * Speculative (rejection) sampling over a chain of drafts.
 *
 * - `target`: drafts.size() + 1 rows of target logits (row i: after the context and drafts[0..i)).
 * - `q`: the distributions the drafts were drawn from, one row per draft, already warped; or no
 *   rows, meaning each draft is a deterministic one-hot proposal (n-gram lookup, greedy drafts).
 *
 * For draft x at row i, with p = warp(target row i, sp): draw u uniform in (0, 1) and accept when
 * u < p(x) / q(x) (strictly, so a token with p(x) = 0 is never accepted). On the first rejection
 * the result's `next` is drawn from norm(max(0, p - q)) (for one-hot q: p without x); if its mass
 * rounds to zero it is drawn from p. If every draft is accepted, `next` is drawn from the last
 * row's p. The emitted tokens are then distributed exactly as sampling the target alone.
 * With sp.temperature == 0 this is verify_greedy. Throws std::invalid_argument for a draft token
 * outside [0, V) or with q(x) = 0 (it cannot have been drawn from q), std::domain_error for NaN
 * or +inf logits. Cost: one warp per row read, plus one residual on rejection.
 */
inline verify_result verify_rejection(logits_view target, std::span<const token_id> drafts,
                                      logits_view q, const sampling_params& sp, rng& gen,
                                      rejection_workspace& ws) {
  const std::size_t n = drafts.size();
  const std::size_t v = static_cast<std::size_t>(target.cols());
  if (static_cast<std::size_t>(target.rows()) != n + 1)
    throw std::invalid_argument("verify_rejection: target must have drafts.size() + 1 = " +
                                std::to_string(n + 1) + " rows, has " +
                                std::to_string(target.rows()));
  const bool one_hot = q.rows() == 0;
  if (!one_hot && (static_cast<std::size_t>(q.rows()) != n || q.cols() != target.cols()))
    throw std::invalid_argument(
        "verify_rejection: q must have drafts.size() rows of vocab_size columns (or none)");
  for (std::size_t i = 0; i < n; ++i)
    if (drafts[i] < 0 || static_cast<std::size_t>(drafts[i]) >= v)
      throw std::invalid_argument("verify_rejection: drafts[" + std::to_string(i) +
                                  "] = " + std::to_string(drafts[i]) +
                                  " is outside the vocabulary [0, " + std::to_string(v) + ")");
  if (sp.greedy()) return verify_greedy(target, drafts);

  ws.p.resize(v);
  ws.residual.resize(v);
  auto row = [&](const logits_view& m, std::size_t i) {
    return std::span<const float>(m.row(static_cast<Eigen::Index>(i)).data(), v);
  };
  for (std::size_t i = 0; i < n; ++i) {
    warp(row(target, i), sp, ws.p, ws.warp);
    const auto x = static_cast<std::size_t>(drafts[i]);
    const double px = ws.p[x];
    const double qx = one_hot ? 1.0 : static_cast<double>(q(static_cast<Eigen::Index>(i),
                                                             static_cast<Eigen::Index>(x)));
    if (!(qx > 0.0))
      throw std::invalid_argument("verify_rejection: q(" + std::to_string(i) + ", " +
                                  std::to_string(x) +
                                  ") = 0: a draft token must have been drawn from its q row");
    if (gen.uniform_open() * qx < px) continue;  // accepted
    if (one_hot) {
      residual_one_hot(ws.p, drafts[i], ws.residual);
    } else {
      residual(ws.p, row(q, i), ws.residual);
    }
    return {i, sample(ws.residual, gen)};
  }
  warp(row(target, n), sp, ws.p, ws.warp);
  return {n, sample(ws.p, gen)};
}

/// verify_rejection with a temporary workspace.
inline verify_result verify_rejection(logits_view target, std::span<const token_id> drafts,
                                      logits_view q, const sampling_params& sp, rng& gen) {
  rejection_workspace ws;
  return verify_rejection(target, drafts, q, sp, gen, ws);
}

}  // namespace specdec
