// specdec/decode/draft_phase.hpp - phase 1 of a step: re-plan when due, ask the drafter for a
// chain (up to K tokens) or a tree, check what it proposed, and lay out the rows the target must
// score: [last history token, drafts...] for a chain, the tree's nodes for a tree.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "specdec/concepts/drafter.hpp"
#include "specdec/concepts/tree_drafter.hpp"
#include "specdec/decode/replan.hpp"
#include "specdec/decode/sequence_state.hpp"
#include "specdec/tree/token_tree.hpp"
#include "specdec/types.hpp"

namespace specdec {

namespace detail {

inline void check_draft_token(const sequence_state& s, token_id t) {
  if (t < 0 || static_cast<std::size_t>(t) >= s.vocab)
    throw std::invalid_argument("drafter: proposed token " + std::to_string(t) +
                                " outside the vocabulary [0, " + std::to_string(s.vocab) + ")");
}

/// The deepest level of `shape` (a tree's branching factors) that a tree drafted to it fits in
/// `max_rows` rows, root included, and `max_leaves` leaves: at most `depth`, 0 when max_rows
/// <= 1, never past a factor of 0. O(depth).
inline std::size_t depth_within(std::span<const std::size_t> shape, std::size_t depth,
                                std::size_t max_rows,
                                std::size_t max_leaves = static_cast<std::size_t>(-1)) noexcept {
  if (max_rows <= 1) return 0;
  std::size_t fit = 0, rows = 1, width = 1;
  for (; fit < depth; ++fit) {
    // A factor of 0 ends the shape; width * shape[fit] more rows (and leaves) must fit.
    if (shape[fit] == 0 || shape[fit] > (max_rows - rows) / width ||
        shape[fit] > max_leaves / width)
      break;
    width *= shape[fit];
    rows += width;
  }
  return fit;
}

/// Throws std::invalid_argument unless the tree s.tree drafted for `shape` keeps the TreeDrafter
/// contract and can be verified: its root is the last history token, it is no deeper than
/// `shape` and no node at depth d has more than shape[d] children (so it has no more nodes than
/// the full shape), its tokens are in the vocabulary, its draw is a candidate_draw, q has no rows
/// for a deterministic draw and tree.size() x vocab rows otherwise, every sampled child has
/// q > 0 in its parent's row and children drawn without replacement are distinct. O(nodes),
/// O(k log k) for a node of k > 32 children drawn without replacement.
inline void check_tree_draft(const sequence_state& s, std::span<const std::size_t> shape) {
  const tree_draft& td = s.tree;
  const token_tree& tree = td.tree;
  const auto fail = [](const std::string& why) { throw std::invalid_argument("drafter: " + why); };
  if (tree.token(0) != s.history.back()) fail("the tree's root must be the last history token");
  if (tree.max_depth() > shape.size()) fail("the tree is deeper than requested");
  for (std::size_t i = 0; i < tree.size(); ++i) {
    const auto d = static_cast<std::size_t>(tree.depth(i));
    const std::size_t kids = tree.num_children(i);
    if (kids > 0 && kids > shape[d])
      fail("tree node " + std::to_string(i) + " at depth " + std::to_string(d) + " has " +
           std::to_string(kids) + " children, more than branching[" + std::to_string(d) +
           "] = " + std::to_string(shape[d]));
  }
  for (std::size_t i = 1; i < tree.size(); ++i) detail::check_draft_token(s, tree.token(i));
  const std::size_t v = s.vocab;
  const auto rows = static_cast<std::size_t>(td.q.rows());
  const auto cols = static_cast<std::size_t>(td.q.cols());
  switch (td.draw) {
    case candidate_draw::deterministic:
      if (rows != 0)
        fail("a deterministic tree must have no q rows, has " + std::to_string(rows));
      return;
    case candidate_draw::iid:
    case candidate_draw::without_replacement:
      break;
    default:
      fail("the tree's draw is not iid, without_replacement or deterministic");
  }
  if (rows != tree.size() || cols != v)
    fail("a sampled tree's q must be tree.size() x vocab_size = " + std::to_string(tree.size()) +
         " x " + std::to_string(v) + ", is " + std::to_string(rows) + " x " +
         std::to_string(cols));
  for (std::size_t i = 1; i < tree.size(); ++i) {
    const auto p = static_cast<Eigen::Index>(tree.parent(i));
    const token_id t = tree.token(i);
    if (!(td.q(p, t) > 0.0f))
      fail("tree node " + std::to_string(i) + " proposes token " + std::to_string(t) +
           ", which its parent's q row (node " + std::to_string(p) +
           ") gives probability 0: a candidate must be drawn from that row");
  }
  if (td.draw != candidate_draw::without_replacement) return;
  const auto same_token = [&](std::size_t a, std::size_t b) {
    fail("tree nodes " + std::to_string(a) + " and " + std::to_string(b) +
         " are siblings with the same token " + std::to_string(tree.token(a)) +
         ", which without_replacement cannot draw");
  };
  std::vector<std::pair<token_id, std::int32_t>> sorted;
  for (std::size_t i = 0; i < tree.size(); ++i) {
    const node_range kids = tree.children(i);
    if (kids.size() <= 32) {
      for (std::size_t a = 0; a < kids.size(); ++a)
        for (std::size_t b = a + 1; b < kids.size(); ++b)
          if (tree.token(static_cast<std::size_t>(kids[a])) ==
              tree.token(static_cast<std::size_t>(kids[b])))
            same_token(static_cast<std::size_t>(kids[a]), static_cast<std::size_t>(kids[b]));
      continue;
    }
    sorted.clear();
    for (const std::int32_t c : kids) sorted.emplace_back(tree.token(static_cast<std::size_t>(c)), c);
    std::sort(sorted.begin(), sorted.end());
    for (std::size_t k = 1; k < sorted.size(); ++k)
      if (sorted[k].first == sorted[k - 1].first)
        same_token(static_cast<std::size_t>(sorted[k - 1].second),
                   static_cast<std::size_t>(sorted[k].second));
  }
}

/// The longest history s's generation can reach: prompt + max_new_tokens within the target's
/// max_size (saturating).
inline std::size_t longest_history(const sequence_state& s) noexcept {
  const std::size_t room = std::numeric_limits<std::size_t>::max() - s.prompt_size;
  return std::min(s.capacity, s.prompt_size + std::min(s.options.max_new_tokens, room));
}

/// At the first step of a generation: the history gets room for the whole generation (when
/// that is at most 2^24 tokens more; past it, it grows as it goes), and a drafter with the
/// optional member reserve(n) is asked to prepare for a history of that length, so that no
/// later step grows either.
template <class Draft>
void reserve_generation(sequence_state& s, Draft& drafter) {
  if (s.generated() != 0) return;
  const std::size_t n = longest_history(s);
  if (n <= s.history.size() || n - s.history.size() > (std::size_t{1} << 24)) return;
  s.history.reserve(n);
  if (s.options.sampling.processor) s.prefixes.reserve(n);  // a prefix is never longer
  if constexpr (requires { drafter.reserve(n); }) {
    try {
      drafter.reserve(n);
    } catch (const std::length_error&) {  // a history it cannot hold: it will say so when it must
    }
  }
}

/// Sizes what the verify and commit phases fill for the step s just drafted (the accepted
/// tokens, the tree path, the verdict's nodes, the statistics' counts by depth and rank) for the
/// most this step's bounds allow (`bound` positions; a tree within `shape`), so that they
/// allocate nothing, whatever is drafted and accepted, once a step of these bounds was seen. The
/// counts by depth and rank (offered_at_rank, accepted_at_rank) then hold zeros for candidates
/// within the bounds not yet judged. O(nodes).
inline void reserve_verdict(sequence_state& s, std::size_t bound,
                            std::span<const std::size_t> shape) {
  const std::size_t depth = std::max(s.positions, bound);
  s.accepted.reserve(depth);
  s.path.reserve(depth + 1);
  s.tree_verdict.accepted.reserve(depth);
  const auto width = [&](std::size_t d) -> std::size_t {  // the most children at depth d
    if (!s.tree_step) return 1;
    std::size_t w = d < shape.size() ? shape[d] : 0;  // no node has more children (checked)
    for (const std::int32_t node : s.tree.tree.level(d))
      w = std::max(w, s.tree.tree.num_children(static_cast<std::size_t>(node)));
    return w;
  };
  const auto size_counts = [&](decode_stats& st) {
    st.drafted_at.reserve(depth);  // their size stays the deepest position drafted
    st.accepted_at.reserve(depth);
    if (st.offered_at_rank.size() < depth) {
      st.offered_at_rank.resize(depth);
      st.accepted_at_rank.resize(depth);
    }
    for (std::size_t d = 0; d < depth; ++d) {
      const std::size_t w = width(d);
      if (st.offered_at_rank[d].size() < w) st.offered_at_rank[d].resize(w);
      if (st.accepted_at_rank[d].size() < w) st.accepted_at_rank[d].resize(w);
    }
  };
  size_counts(s.stats);
  if (s.options.policy.every > 0) size_counts(s.measured);
}

}  // namespace detail

/**
 * Drafts this step of s (a running sequence) with `drafter`, at most `max_k` draft positions
 * (the batch decoder's K policy; the options' K or tree otherwise) and at most `max_rows` rows
 * to score (the batch model's max_batch_tokens(); the last token's row is scored even when it
 * is 0). A tree's depth is cut to the levels whose full shape fits every bound: those rows, the
 * room the target's max_size() leaves (the context plus every node of the tree, see
 * TreeLanguageModel), the model's max_tree_size() and max_tree_leaves(), and max_tree_nodes. A
 * tree that comes back as its root alone (the drafter had nothing to draft, whatever its draw)
 * is a plain step: the root's row alone, a deterministic tree of one node. Afterwards
 * s.score_tokens() / s.score_parents() say what to score, s.logits has room for the rows and s
 * expects the verify phase.
 * Throws std::logic_error when s is done or expects another phase (phase_name), and
 * std::invalid_argument for a draft that breaks the Drafter or TreeDrafter contract (see
 * check_tree_draft; a chain: a token out of the vocabulary, q rows of the wrong shape); whatever
 * the drafter throws propagates. The model is not touched either way, and s still expects a
 * draft.
 */
template <class Draft>
void draft_phase(sequence_state& s, Draft& drafter, std::size_t max_k = static_cast<std::size_t>(-1),
                 std::size_t max_rows = static_cast<std::size_t>(-1)) {
  if (s.done)
    throw std::logic_error("draft_phase: the sequence is done (" +
                           std::string(s.history.empty() ? "never started" : "finished") +
                           "); start_sequence begins a new generation");
  s.require_phase(step_phase::draft, "draft_phase");
  const auto t0 = detail::decode_clock::now();
  detail::reserve_generation(s, drafter);
  if (detail::replan_due(s)) detail::replan(s);
  const std::size_t v = s.vocab;
  std::size_t bound = 0;                  // the most positions this step may draft
  std::span<const std::size_t> shape_in;  // and, for a tree, its shape
  s.history_before = s.history.size();
  s.calls = 1;  // a chain's append, or one batched call; score_phase counts a tree's
  s.tree_step = false;
  if constexpr (TreeDrafter<Draft>) s.tree_step = s.can_tree && !s.options.tree.empty();
  if (s.tree_step) {
    if constexpr (TreeDrafter<Draft>) {
      // The model holds history.size() - 1 tokens; a tree's nodes are pending on top of them.
      const std::size_t room = s.capacity - (s.history.size() - 1);
      const std::size_t depth = detail::depth_within(
          s.options.tree, std::min({s.options.tree.size(), s.draft_budget(), max_k}),
          std::min({max_rows, room, max_tree_nodes, s.tree_rows}), s.tree_leaves);
      const auto shape = std::span<const std::size_t>(s.options.tree).first(depth);
      bound = depth;
      shape_in = shape;
      tree_draft& td = s.tree;
      // Room for the full shape's nodes: a drafter building the tree in place
      // (token_tree::assign) allocates nothing once a step of this shape was seen.
      td.tree.reserve(shape_nodes(shape) + 1);
      if (depth > 0)
        drafter.propose_tree(s.history, shape, s.draft_sampling, s.gen, s.options.tree_draw, td);
      if (depth == 0 || td.tree.size() == 1) {
        // Nothing drafted (no room, or the root alone, whatever its draw and q): a plain step,
        // the last token's row alone. td.q keeps its storage; a deterministic draw reads none.
        td.tree.reset(s.history.back());
        td.draw = candidate_draw::deterministic;
      } else {
        detail::check_tree_draft(s, shape);
      }
      s.positions = td.tree.max_depth();
      s.nodes = td.tree.size() - 1;
    }
  } else {
    const std::size_t k = std::min(
        {s.options.draft_length, s.draft_budget(), max_k, max_rows > 0 ? max_rows - 1 : 0});
    bound = k;
    s.chain.clear();
    s.chain.tokens.reserve(k);  // a drafter that pushes its tokens allocates nothing
    s.feed.reserve(k + 1);
    if (k > 0) drafter.propose(s.history, k, s.draft_sampling, s.gen, s.chain);
    if (s.chain.size() > k)
      throw std::invalid_argument("drafter: proposed " + std::to_string(s.chain.size()) +
                                  " tokens, more than the k = " + std::to_string(k) + " asked");
    const std::size_t n = s.chain.size();
    for (std::size_t i = 0; i < n; ++i) detail::check_draft_token(s, s.chain.tokens[i]);
    if (!s.chain.deterministic() && (static_cast<std::size_t>(s.chain.q.rows()) < n ||
                                     static_cast<std::size_t>(s.chain.q.cols()) != v))
      throw std::invalid_argument("drafter: q must have one row of vocab_size = " +
                                  std::to_string(v) + " per draft token (" + std::to_string(n) +
                                  "), is " + std::to_string(s.chain.q.rows()) + " x " +
                                  std::to_string(s.chain.q.cols()));
    s.feed.assign(1, s.history.back());
    s.feed.insert(s.feed.end(), s.chain.tokens.begin(),
                  s.chain.tokens.begin() + static_cast<std::ptrdiff_t>(n));
    s.positions = n;
    s.nodes = n;
  }
  if (!s.tree_step) s.logits.resize((bound + 1) * v);  // room for a full chain: grows once
  s.logits.resize(s.score_tokens().size() * v);
  detail::reserve_verdict(s, bound, shape_in);
  s.draft_seconds = detail::seconds_between(t0, detail::decode_clock::now());
  s.expects = step_phase::verify;
}

}  // namespace specdec
