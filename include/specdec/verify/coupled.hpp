// specdec/verify/coupled.hpp - draw-and-match verification: the target draws each position as
// plain decoding does, and a draft is kept while it equals that draw. Coupled verification draws
// with noise keyed by seed, position and token (math/coupled.hpp), so the tokens are plain
// decoding's whatever was drafted; sample-and-match (llama.cpp's rule, the baseline) draws with
// the generator.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>

#include "specdec/math/coupled.hpp"
#include "specdec/math/rng.hpp"
#include "specdec/math/sample.hpp"
#include "specdec/math/warp.hpp"
#include "specdec/math/sampling_params.hpp"
#include "specdec/tree/token_tree.hpp"
#include "specdec/types.hpp"
#include "specdec/verify/draw_match.hpp"
#include "specdec/verify/multi_candidate.hpp"
#include "specdec/verify/result.hpp"
#include "specdec/verify/row_hook.hpp"

namespace specdec {

namespace detail {

// Draw-and-match verification of a chain (draw_match.hpp) with the checks of coupled and
// sample-and-match verification: shapes, and drafts inside the vocabulary.
template <class Draw, class RowHook>
verify_result verify_by_draws(const char* who, logits_view target,
                              std::span<const token_id> drafts, Draw&& draw, RowHook&& on_read) {
  const std::size_t n = drafts.size();
  const auto v = static_cast<std::size_t>(target.cols());
  if (static_cast<std::size_t>(target.rows()) != n + 1)
    throw std::invalid_argument(std::string(who) + ": target must have drafts.size() + 1 = " +
                                std::to_string(n + 1) + " rows, has " +
                                std::to_string(target.rows()));
  for (std::size_t i = 0; i < n; ++i)
    if (drafts[i] < 0 || static_cast<std::size_t>(drafts[i]) >= v)
      throw std::invalid_argument(std::string(who) + ": drafts[" + std::to_string(i) + "] = " +
                                  std::to_string(drafts[i]) + " is outside the vocabulary [0, " +
                                  std::to_string(v) + ")");
  return match_draws(target, drafts, draw, on_read);
}

// The same down a token tree, with its shape check.
template <class Draw, class RowHook>
void verify_tree_by_draws(const char* who, const token_tree& tree, logits_view target,
                          Draw&& draw, tree_verify_result& out, RowHook&& on_read) {
  const std::size_t n = tree.size();
  if (static_cast<std::size_t>(target.rows()) != n)
    throw std::invalid_argument(std::string(who) + ": target must have tree.size() = " +
                                std::to_string(n) + " rows, has " +
                                std::to_string(target.rows()));
  match_tree_draws(tree, target, draw, out, on_read);
}

// Sample-and-match's draw of a row: the argmax when greedy, else a sample of the warped row
// (held in ws.weights) with the generator, as plain decoding with that rule draws it.
inline auto generator_draw(const sampling_params& sp, rng& gen, coupled_workspace& ws) {
  return [&sp, &gen, &ws](std::size_t, std::span<const float> row) {
    if (sp.greedy()) return argmax(row);
    ws.weights.resize(row.size());
    warp(row, sp, ws.weights, ws.warp);
    return sample(ws.weights, gen);
  };
}

}  // namespace detail

/**
 * Coupled verification of a chain. `target` has drafts.size() + 1 rows (row i after the
 * context and drafts[0..i)); row i's token is at `position` + i of the sequence. Each row's
 * token is coupled_sample(row, sp, coupled_key(sp.seed, position + i)), exactly what plain
 * decoding in coupled mode draws there; drafts are kept while they equal it, and the first
 * draw that differs (or the draw after the last draft) is `next`. So the emitted tokens are plain
 * decoding's, token for token, whatever was drafted, and distributed as sampling the warped
 * target (each draw is exact, under noise independent across positions). No q is read: a draft
 * drawn with the same noise from a close distribution is kept about as often as rejection
 * sampling keeps one. Greedy: verify_greedy's verdict. Reads rows 0..accepted, calling
 * `on_read(i)` first (row_hook.hpp). Throws std::invalid_argument for mismatched shapes or a
 * draft outside [0, V), std::domain_error for NaN or +inf in a row read. O(V) per row read.
 */
template <class RowHook = no_row_hook>
verify_result verify_coupled(logits_view target, std::span<const token_id> drafts,
                             const sampling_params& sp, std::size_t position,
                             coupled_workspace& ws, RowHook&& on_read = {}) {
  ws.reserve(static_cast<std::size_t>(target.cols()));
  return detail::verify_by_draws(
      "verify_coupled", target, drafts,
      [&](std::size_t i, std::span<const float> row) {
        return coupled_sample(row, sp, coupled_key(sp.seed, position + i), ws);
      },
      on_read);
}

/**
 * Coupled verification of a token tree (rows as verify_tree's; the root's row draws the token
 * at `position`, a node at depth d the token at position + d): from the root, the node's row is
 * drawn as plain decoding in coupled mode draws it, and the walk moves to the first child with
 * that token, or stops and emits it. Candidates' draws and q are not read. Same guarantees and
 * errors as verify_coupled; reads the rows of the path and its stop node, calling `on_read`
 * first.
 */
template <class RowHook = no_row_hook>
void verify_tree_coupled(const token_tree& tree, logits_view target, const sampling_params& sp,
                         std::size_t position, coupled_workspace& ws, tree_verify_result& out,
                         RowHook&& on_read = {}) {
  ws.reserve(static_cast<std::size_t>(target.cols()));
  detail::verify_tree_by_draws(
      "verify_tree_coupled", tree, target,
      [&](std::size_t depth, std::span<const float> row) {
        return coupled_sample(row, sp, coupled_key(sp.seed, position + depth), ws);
      },
      out, on_read);
}

/**
 * Sample-and-match verification (llama.cpp's speculative rule; here as the baseline coupled
 * verification is measured against): each row's token is sampled from the warped row with the
 * generator, in order, as plain decoding samples it, and drafts are kept while they equal it.
 * Exact for any drafts (the emitted tokens are the target's own samples), but a draft is kept only
 * with probability p(draft), so it is best with greedy drafts. `ws` holds the warped row. Reads
 * rows 0..accepted (on_read first). Errors as verify_coupled. O(V) per row read.
 */
template <class RowHook = no_row_hook>
verify_result verify_sample_match(logits_view target, std::span<const token_id> drafts,
                                  const sampling_params& sp, rng& gen, coupled_workspace& ws,
                                  RowHook&& on_read = {}) {
  ws.reserve(static_cast<std::size_t>(target.cols()));
  return detail::verify_by_draws(
      "verify_sample_match", target, drafts,
      detail::generator_draw(sp, gen, ws),
      on_read);
}

/// Sample-and-match verification of a token tree: verify_tree_by_draws with the generator's
/// samples, node by node down the accepted path.
template <class RowHook = no_row_hook>
void verify_tree_sample_match(const token_tree& tree, logits_view target,
                              const sampling_params& sp, rng& gen, coupled_workspace& ws,
                              tree_verify_result& out, RowHook&& on_read = {}) {
  ws.reserve(static_cast<std::size_t>(target.cols()));
  detail::verify_tree_by_draws(
      "verify_tree_sample_match", tree, target,
      detail::generator_draw(sp, gen, ws),
      out, on_read);
}

}  // namespace specdec
