// specdec/verify/rejection.hpp - lossless speculative sampling (Leviathan et al.; Chen et al. 2023).
#pragma once

#include <algorithm>
#include <cstddef>
#include <limits>
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
#include "specdec/verify/row_hook.hpp"

namespace specdec {

/// Scratch memory for verify_rejection, reused across calls. Not thread-safe.
struct rejection_workspace {
  std::vector<float> p;
  std::vector<float> residual;
  std::vector<double> blocks;
  warp_workspace warp;
  /// Room for rows of v logits, on every path: verify_rejection then allocates nothing.
  void reserve(std::size_t v) {
    p.reserve(v);
    residual.reserve(v);
    blocks.reserve(detail::block_count(v));
    warp.reserve(v);
  }
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
 * the result's `next` is drawn from norm(max(0, p - q)) (for one-hot q: p without x), however
 * small its mass, so a rejected draft is never emitted (see residual() and residual_one_hot()
 * for the one case exact arithmetic rules out, an empty residual). If every draft is accepted, `next` is drawn from the last
 * row's p. The emitted tokens are then distributed exactly as sampling the target alone.
 * With sp.temperature == 0 this is verify_greedy. Throws std::invalid_argument for a draft token
 * outside [0, V) or with q(x) = 0 (it cannot have been drawn from q), std::domain_error for NaN
 * or +inf logits. Cost per row read: with temperature alone, a max pass and an exp-sum pass (the
 * row of p is not written; the last row's bonus token is drawn from one exp-sum pass that keeps
 * block sums, then the exps of the drawn block of 1024); with top-p alone, the same plus a
 * compare per value, and a warp only when u falls in the window where p(x) must be known exactly
 * (probability about (1 / top_p - 1) * p(x) / q(x)) or when x's mass lies within 10^-4 (relative)
 * of the nucleus boundary; the bonus token is drawn from all of p and redrawn while it falls
 * outside the nucleus (each test one pass; up to 4 tries, then a warp). Membership in the
 * nucleus is warp's, exactly (see warp, step 4). With top-k or min-p, one warp per row. A
 * rejection adds one warp and one residual. Rows past the first rejection are not read;
 * `on_read(i)` is called before row i is first read (row_hook.hpp).
 */
template <class RowHook = no_row_hook>
verify_result verify_rejection(logits_view target, std::span<const token_id> drafts,
                               logits_view q, const sampling_params& sp, rng& gen,
                               rejection_workspace& ws, RowHook&& on_read = {}) {
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
  if (sp.greedy()) return verify_greedy(target, drafts, on_read);

  ws.reserve(v);  // every path's buffers at once: a rarer path later allocates nothing
  ws.p.resize(v);
  ws.residual.resize(v);
  auto row = [&](const logits_view& m, std::size_t i) {
    return std::span<const float>(m.row(static_cast<Eigen::Index>(i)).data(), v);
  };
  // Temperature alone: p(x) = exp((l_x - max) / T) / sum, one log-sum-exp pass, no row written.
  // Top-p alone: the same pass also sums the weights e_i above e_x, and detail::nucleus_test
  // tells from the two sums whether x is in the nucleus by warp's rule (or that only warp can
  // tell, near the boundary). Inside, p(x) = e_x / N with N between about
  // max(top_p * sum, above + e_x) and sum, which settles most draws u without finding the
  // nucleus (a full warp settles the rest).
  const bool no_top_k = sp.top_k == 0 || sp.top_k >= v;
  const bool temperature_only = no_top_k && !(sp.top_p < 1.0f) && !(sp.min_p > 0.0f);
  const bool top_p_only = no_top_k && sp.top_p < 1.0f && !(sp.min_p > 0.0f);
  if (sp.top_p < 1.0f && v > detail::max_mass_vocab)
    throw std::invalid_argument("verify_rejection: top_p < 1 needs a vocabulary of at most " +
                                std::to_string(detail::max_mass_vocab) + " tokens, got " +
                                std::to_string(v));
  const float inv_t = 1.0f / sp.temperature;
  constexpr float neg_inf = -std::numeric_limits<float>::infinity();
  for (std::size_t i = 0; i < n; ++i) {
    on_read(i);
    const auto logits = row(target, i);
    const auto x = static_cast<std::size_t>(drafts[i]);
    const double qx = one_hot ? 1.0 : static_cast<double>(q(static_cast<Eigen::Index>(i),
                                                             static_cast<Eigen::Index>(x)));
    double px_low = 0.0, px_high = 0.0;  // bounds of p(x); equal once p(x) is known
    bool materialised = false;
    if (temperature_only || top_p_only) {
      bool masked = false;
      const float m = checked_max(logits, &masked);
      const float lx = logits[x];
      const float ex = lx == neg_inf ? 0.0f : detail::packet_exp((lx - m) * inv_t);
      if (temperature_only) {
        const double total =
            detail::exp_blocks(logits.data(), v, m, inv_t, masked, nullptr, nullptr);
        px_low = px_high = static_cast<double>(ex) / total;
      } else {
        double above = 0.0;
        const double total =
            masked ? detail::exp_blocks<true, true>(logits.data(), v, m, inv_t, nullptr, nullptr,
                                                    ex, &above)
                   : detail::exp_blocks<false, true>(logits.data(), v, m, inv_t, nullptr, nullptr,
                                                     ex, &above);
        switch (detail::nucleus_test(above, total, sp.top_p, v)) {
          case detail::nucleus_verdict::in: {
            // N >= top_p * sum and N >= above + e_x, up to the rounding of the sums; the slack
            // of 2^-11 covers it and the rounding of p(x) as warp computes it.
            const double n_low =
                std::max(static_cast<double>(sp.top_p) * total, above + static_cast<double>(ex));
            px_low = static_cast<double>(ex) / total * (1.0 - 0x1p-11);
            px_high = static_cast<double>(ex) / n_low * (1.0 + 0x1p-11);
            break;
          }
          case detail::nucleus_verdict::out:  // p(x) = 0: rejected
            break;
          case detail::nucleus_verdict::unsure:  // let warp decide
            px_high = std::numeric_limits<double>::infinity();
            break;
        }
      }
    } else {
      warp(logits, sp, ws.p, ws.warp);
      px_low = px_high = ws.p[x];
      materialised = true;
    }
    if (!(qx > 0.0))
      throw std::invalid_argument("verify_rejection: q(" + std::to_string(i) + ", " +
                                  std::to_string(x) +
                                  ") = 0: a draft token must have been drawn from its q row");
    const double uq = gen.uniform_open() * qx;
    if (uq < px_low) continue;  // accepted
    if (uq < px_high) {         // p(x) is needed exactly
      warp(logits, sp, ws.p, ws.warp);
      materialised = true;
      if (uq < static_cast<double>(ws.p[x])) continue;  // accepted
    }
    if (!materialised) warp(logits, sp, ws.p, ws.warp);
    if (one_hot) {
      residual_one_hot(ws.p, drafts[i], ws.residual);
    } else {
      residual(ws.p, row(q, i), ws.residual);
    }
    return {i, sample(ws.residual, gen)};
  }
  on_read(n);
  const auto logits = row(target, n);
  if (temperature_only) {  // one exp-sum pass keeping block sums, then the drawn block again
    bool masked = false;
    const float m = checked_max(logits, &masked);
    ws.blocks.resize(detail::block_count(v));
    const double total =
        detail::exp_blocks(logits.data(), v, m, inv_t, masked, nullptr, ws.blocks.data());
    return {n, detail::sample_in_blocks(ws.blocks, total, gen, [&](std::size_t b) {
              const std::size_t begin = b * detail::block;
              const std::size_t size = std::min(detail::block, v - begin);
              detail::exp_blocks(logits.data() + begin, size, m, inv_t, masked, ws.p.data(),
                                 nullptr);
              return std::span<const float>(ws.p.data(), size);
            })};
  }
  if (top_p_only) {  // one exp pass into p that keeps block sums
    bool masked = false;
    const float m = checked_max(logits, &masked);
    ws.blocks.resize(detail::block_count(v));
    const double total =
        detail::exp_blocks(logits.data(), v, m, inv_t, masked, ws.p.data(), ws.blocks.data());
    // Top-p: draw from all of p and keep the draw if it is in the nucleus, which is a draw from
    // the nucleus; after a few misses, warp and draw. If the sums cannot tell whether the draw is
    // in, warp decides: keep the draw if it is, else draw from the nucleus (as the retries would).
    for (int attempt = 0; attempt < 4; ++attempt) {
      const token_id y = detail::sample_in_blocks(ws.p, ws.blocks, total, gen);
      const auto y_at = static_cast<std::size_t>(y);
      const auto verdict = detail::nucleus_test(detail::weight_above(ws.p.data(), v, ws.p[y_at]),
                                                total, sp.top_p, v);
      if (verdict == detail::nucleus_verdict::in) return {n, y};
      if (verdict == detail::nucleus_verdict::unsure) {
        warp(logits, sp, ws.p, ws.warp);
        return {n, ws.p[y_at] > 0.0f ? y : sample(ws.p, gen)};
      }
    }
  }
  warp(logits, sp, ws.p, ws.warp);
  return {n, sample(ws.p, gen)};
}

/// verify_rejection with a temporary workspace.
inline verify_result verify_rejection(logits_view target, std::span<const token_id> drafts,
                                      logits_view q, const sampling_params& sp, rng& gen) {
  rejection_workspace ws;
  return verify_rejection(target, drafts, q, sp, gen, ws);
}

}  // namespace specdec
