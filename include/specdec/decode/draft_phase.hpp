// specdec/decode/draft_phase.hpp - phase 1 of a step: re-plan when due, ask the drafter for a
// chain (up to K tokens) or a tree, check what it proposed, and lay out the rows the target must
// score: [last history token, drafts...] for a chain, the tree's nodes for a tree.
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>
#include <stdexcept>
#include <string>

#include "specdec/concepts/drafter.hpp"
#include "specdec/concepts/tree_drafter.hpp"
#include "specdec/decode/replan.hpp"
#include "specdec/decode/sequence_state.hpp"
#include "specdec/tree/token_tree.hpp"
#include "specdec/types.hpp"

namespace specdec::detail {

inline void check_draft_token(const sequence_state& s, token_id t) {
  if (t < 0 || static_cast<std::size_t>(t) >= s.vocab)
    throw std::invalid_argument("drafter: proposed token " + std::to_string(t) +
                                " outside the vocabulary [0, " + std::to_string(s.vocab) + ")");
}

/// The deepest level of `shape` (a tree's branching factors) that a tree drafted to it fits in
/// `max_rows` rows, root included: at most `depth`. O(depth).
inline std::size_t depth_within(std::span<const std::size_t> shape, std::size_t depth,
                                std::size_t max_rows) noexcept {
  std::size_t fit = 0, rows = 1, width = 1;
  for (; fit < depth; ++fit) {
    if (shape[fit] > (max_rows - rows) / width) break;  // width * shape[fit] rows do not fit
    width *= shape[fit];
    rows += width;
  }
  return fit;
}

/**
 * Drafts this step of s (a running sequence) with `drafter`, at most `max_k` draft positions
 * (the batch decoder's K policy; the options' K or tree otherwise) and at most `max_rows` rows
 * to score (the batch model's max_batch_tokens(); for a tree, the depth is cut to the levels
 * whose full width fits). Afterwards
 * s.score_tokens() / s.score_parents() say what to score and s.logits has room for the rows.
 * Throws std::invalid_argument for a draft that is out of the vocabulary, a tree whose root is
 * not the last token or deeper than asked, or q rows of the wrong shape; whatever the drafter
 * throws propagates. The model is not touched either way.
 */
template <class Draft>
void draft_phase(sequence_state& s, Draft& drafter, std::size_t max_k = static_cast<std::size_t>(-1),
                 std::size_t max_rows = static_cast<std::size_t>(-1)) {
  const auto t0 = decode_clock::now();
  if (replan_due(s)) replan(s, TreeDrafter<Draft>);
  const std::size_t v = s.vocab;
  s.history_before = s.history.size();
  s.tree_step = false;
  if constexpr (TreeDrafter<Draft>) s.tree_step = !s.options.tree.empty();
  if (s.tree_step) {
    if constexpr (TreeDrafter<Draft>) {
      const std::size_t depth = depth_within(
          s.options.tree, std::min({s.options.tree.size(), s.draft_budget(), max_k}), max_rows);
      tree_draft& td = s.tree;
      if (depth > 0) {
        drafter.propose_tree(s.history, std::span<const std::size_t>(s.options.tree).first(depth),
                             s.options.sampling, s.gen, s.options.tree_draw, td);
      } else {
        td.tree = token_tree(s.history.back());
        td.q.resize(0, static_cast<Eigen::Index>(v));
        td.draw = candidate_draw::deterministic;
      }
      if (td.tree.token(0) != s.history.back())
        throw std::invalid_argument("drafter: the tree's root must be the last history token");
      if (td.tree.max_depth() > depth)
        throw std::invalid_argument("drafter: the tree is deeper than requested");
      for (std::size_t i = 1; i < td.tree.size(); ++i) check_draft_token(s, td.tree.token(i));
      s.positions = td.tree.max_depth();
      s.nodes = td.tree.size() - 1;
    }
  } else {
    const std::size_t k = std::min({s.options.draft_length, s.draft_budget(), max_k, max_rows - 1});
    s.chain.clear();
    if (k > 0) drafter.propose(s.history, k, s.options.sampling, s.gen, s.chain);
    const std::size_t n = std::min(s.chain.size(), k);
    for (std::size_t i = 0; i < n; ++i) check_draft_token(s, s.chain.tokens[i]);
    if (!s.chain.deterministic() && (static_cast<std::size_t>(s.chain.q.rows()) < n ||
                                     static_cast<std::size_t>(s.chain.q.cols()) != v))
      throw std::invalid_argument("drafter: q must have one row of vocab_size per draft token");
    s.feed.assign(1, s.history.back());
    s.feed.insert(s.feed.end(), s.chain.tokens.begin(),
                  s.chain.tokens.begin() + static_cast<std::ptrdiff_t>(n));
    s.positions = n;
    s.nodes = n;
  }
  s.logits.resize(s.score_tokens().size() * v);
  s.draft_seconds = seconds_between(t0, decode_clock::now());
}

}  // namespace specdec::detail
