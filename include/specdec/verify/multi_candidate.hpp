// specdec/verify/multi_candidate.hpp - lossless verification of a token tree (multi-candidate
// speculative sampling, Yang et al. 2024, Algorithms 1 and 2; deterministic candidates).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "specdec/math/rng.hpp"
#include "specdec/math/sample.hpp"
#include "specdec/math/sampling_params.hpp"
#include "specdec/math/warp.hpp"
#include "specdec/tree/token_tree.hpp"
#include "specdec/tree/tree_draft.hpp"
#include "specdec/types.hpp"
#include "specdec/verify/draw_match.hpp"
#include "specdec/verify/result.hpp"
#include "specdec/verify/row_hook.hpp"

namespace specdec {


/// Scratch memory reused across verify_tree calls so that, once grown to the vocabulary size
/// and tree depth, verification allocates nothing. Not thread-safe.
struct tree_verify_workspace {
  std::vector<float> p;         // current target distribution (residual after rejections)
  std::vector<float> scratch;   // residual output
  std::vector<float> q;         // q with drawn candidates removed (Algorithm 2)
  warp_workspace warp;
};

namespace detail {

inline std::span<const float> row_of(const logits_view& m, std::size_t i) {
  return {m.row(static_cast<Eigen::Index>(i)).data(), static_cast<std::size_t>(m.cols())};
}

// x <- x / mass for every value, in double: a mass below 1 / FLT_MAX has an inverse no float holds.
inline void normalise(std::span<float> x, double mass) {
  const double inv = 1.0 / mass;
  for (float& v : x) v = static_cast<float>(static_cast<double>(v) * inv);
}

// p <- norm(scratch) where scratch holds an unnormalised residual of `mass`; swaps buffers.
inline void take_residual(tree_verify_workspace& ws, double mass) {
  normalise(ws.scratch, mass);
  std::swap(ws.p, ws.scratch);
}

// One node of a sampling walk: ws.p holds the warped target row of `node`. Tries the children
// in order; returns the accepted child or -1 with ws.p left as the final residual (unnormalised
// for deterministic candidates; sample() accepts that).
inline std::int32_t choose_child(const token_tree& tree, std::size_t node, const logits_view& q,
                                 candidate_draw draw, rng& gen, tree_verify_workspace& ws) {
  const auto kids = tree.children(node);
  if (kids.empty()) return -1;
  std::span<const float> q_row;
  if (draw != candidate_draw::deterministic) q_row = row_of(q, node);
  if (draw == candidate_draw::without_replacement) ws.q.assign(q_row.begin(), q_row.end());
  // Deterministic: ws.p stays unnormalised with total `mass` (summed as sample() sums it), so
  // that removing a rejected x is O(1), not a pass over V.
  double mass = draw == candidate_draw::deterministic ? block_sums(ws.p, nullptr) : 1.0;
  for (const std::int32_t child : kids) {
    const token_id x = tree.token(static_cast<std::size_t>(child));
    const auto xi = static_cast<std::size_t>(x);
    const double px = ws.p[xi];
    switch (draw) {
      case candidate_draw::deterministic: {
        if (gen.uniform_open() * mass < px) return child;
        if (!(px > 0.0)) break;  // nothing to remove (a zero token, or a duplicate)
        ws.p[xi] = 0.0f;
        // A small remainder is summed again rather than left to cancellation.
        const double rest = mass - px < 1e-3 ? block_sums(ws.p, nullptr) : mass - px;
        if (!(rest > 0.0)) {  // x was p's only token: the one p can give (as residual_one_hot)
          ws.p[xi] = static_cast<float>(px);
          return -1;
        }
        mass = rest;
        break;
      }
      case candidate_draw::iid: {
        const double qx = q_row[xi];
        if (!(qx > 0.0))
          throw std::invalid_argument("verify_tree: q(" + std::to_string(node) + ", " +
                                      std::to_string(x) + ") = 0 but node " +
                                      std::to_string(child) + " proposes it: a candidate must "
                                      "have been drawn from its parent's q row");
        if (gen.uniform_open() * qx < px) return child;
        take_residual(ws, residual(ws.p, q_row, ws.scratch));
        break;
      }
      case candidate_draw::without_replacement: {
        // q_j = q without the candidates already tried, renormalised.
        const double mass = block_sums(ws.q, nullptr);
        if (!(ws.q[xi] > 0.0f) || !(mass > 0.0))
          throw std::invalid_argument(
              "verify_tree: node " + std::to_string(child) + " proposes token " +
              std::to_string(x) + ", which q(" + std::to_string(node) +
              ") minus the earlier candidates gives probability 0 (drawn twice, or not from q)");
        normalise(ws.q, mass);
        if (gen.uniform_open() * static_cast<double>(ws.q[xi]) < px) return child;
        take_residual(ws, residual(ws.p, ws.q, ws.scratch));  // p <- norm(max(0, p - q_j))
        ws.q[xi] = 0.0f;                                      // q_{j+1}: x_j removed
        break;
      }
    }
  }
  return -1;
}

}  // namespace detail

/**
 * Verifies a token tree against the target, walking from the root. At each node its children
 * are the candidates: one is accepted (the walk moves to it) or all are rejected and `next` is
 * drawn from the residual; at a node without children `next` is the bonus token drawn from that
 * node's row. The emitted tokens are distributed exactly as sampling the target alone.
 *
 * - `target`: tree.size() rows of V logits; row i is the target's next-token logits after node
 *   i (and its ancestors). Warped with `sp` before use.
 * - `q`: for iid and without_replacement, tree.size() rows of V probabilities; row i is the
 *   (already warped) draft distribution the children of node i were drawn from. Rows of leaves
 *   are never read. For deterministic, no rows.
 * - Per candidate x at a node with current target distribution p:
 *   iid: accept when u < p(x) / q(x); else p <- norm(max(0, p - q)), same q for the next one.
 *   without_replacement: q_j = q minus the earlier candidates, renormalised; accept when
 *   u < p(x) / q_j(x); else p <- norm(max(0, p - q_j)).
 *   deterministic: accept when u < p(x); else p <- p without x, renormalised.
 *   u is uniform in (0, 1) and the test strict, so p(x) = 0 is never accepted (a duplicate of a
 *   rejected token has p(x) = 0 in the residual). A residual is used however small its mass, so a
 *   rejected candidate is never emitted; only an empty one (which exact arithmetic rules out)
 *   falls back to the current p (see residual() and residual_one_hot()).
 * - sp.temperature == 0: greedy walk, following the first child equal to the argmax (lowest id
 *   on ties); `next` is the argmax at the stop node. `draw` and `q` are then not read.
 *
 * Throws std::invalid_argument for mismatched shapes, a `draw` that disagrees with `q` (rows iff
 * not deterministic), a non-root token outside [0, V), a candidate that cannot have been drawn
 * (q(x) = 0 on a visited node), bad `sp`; std::domain_error for NaN or +inf in a row read.
 * Cost: one warp (O(V)) per visited node plus O(V) per rejected candidate (O(1) for
 * deterministic candidates) and one O(V) draw at the stop node; allocation-free once
 * `ws` and `out.accepted` have grown. Only the rows of visited nodes (the accepted path and the
 * stop node) are read; `on_read(node)` is called before each is read (row_hook.hpp). Not
 * thread-safe per workspace.
 */
template <class RowHook = no_row_hook>
void verify_tree(const token_tree& tree, logits_view target, logits_view q, candidate_draw draw,
                 const sampling_params& sp, rng& gen, tree_verify_workspace& ws,
                 tree_verify_result& out, RowHook&& on_read = {}) {
  sp.validate();
  const std::size_t n = tree.size();
  const std::size_t v = static_cast<std::size_t>(target.cols());
  if (static_cast<std::size_t>(target.rows()) != n)
    throw std::invalid_argument("verify_tree: target must have tree.size() = " +
                                std::to_string(n) + " rows, has " +
                                std::to_string(target.rows()));
  if (v == 0) throw std::invalid_argument("verify_tree: target has 0 columns");
  if (draw == candidate_draw::deterministic) {
    if (q.rows() != 0)
      throw std::invalid_argument(
          "verify_tree: q must have no rows when draw is candidate_draw::deterministic");
  } else if (static_cast<std::size_t>(q.rows()) != n || q.cols() != target.cols()) {
    throw std::invalid_argument("verify_tree: q must have tree.size() = " + std::to_string(n) +
                                " rows of " + std::to_string(v) +
                                " probabilities for a sampled draw, has " +
                                std::to_string(q.rows()) + " x " + std::to_string(q.cols()));
  }
  for (std::size_t i = 1; i < n; ++i)
    if (static_cast<std::size_t>(tree.token(i)) >= v)
      throw std::invalid_argument("verify_tree: node " + std::to_string(i) + " has token " +
                                  std::to_string(tree.token(i)) +
                                  " outside the vocabulary [0, " + std::to_string(v) + ")");
  out.accepted.clear();
  out.accepted.reserve(tree.max_depth());  // no allocation once a tree this deep was verified
  std::size_t node = 0;
  if (sp.greedy())  // the argmax at each node, matched against its children
    return detail::match_tree_draws(
        tree, target, [](std::size_t, std::span<const float> row) { return argmax(row); }, out,
        on_read);
  ws.p.resize(v);
  ws.scratch.resize(v);
  ws.q.reserve(v);
  ws.warp.reserve(v);
  for (;;) {
    on_read(node);
    warp(detail::row_of(target, node), sp, ws.p, ws.warp);
    const std::int32_t next = detail::choose_child(tree, node, q, draw, gen, ws);
    if (next < 0) {
      out.next = sample(ws.p, gen);
      return;
    }
    out.accepted.push_back(next);
    node = static_cast<std::size_t>(next);
  }
}

/// verify_tree with a temporary workspace, returning the result (allocates).
inline tree_verify_result verify_tree(const token_tree& tree, logits_view target, logits_view q,
                                      candidate_draw draw, const sampling_params& sp, rng& gen) {
  tree_verify_workspace ws;
  tree_verify_result out;
  verify_tree(tree, target, q, draw, sp, gen, ws, out);
  return out;
}

/// A logits_view with no rows: the `q` to pass with candidate_draw::deterministic.
inline logits_view no_q_rows() noexcept { return logits_view(nullptr, 0, 0); }

}  // namespace specdec
