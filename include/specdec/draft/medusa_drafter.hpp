// specdec/draft/medusa_drafter.hpp - drafts with Medusa heads on the target's own hidden state:
// chains of the heads' tokens, or a (sparse) token tree of their top candidates.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "specdec/concepts/drafter.hpp"
#include "specdec/detail/draft_heads.hpp"
#include "specdec/detail/weight_product.hpp"
#include "specdec/draft/draft_threads.hpp"
#include "specdec/draft/medusa_heads.hpp"
#include "specdec/draft/model_drafter.hpp"
#include "specdec/math/rng.hpp"
#include "specdec/math/sample.hpp"
#include "specdec/math/sampling_params.hpp"
#include "specdec/math/softmax.hpp"
#include "specdec/math/row_processor.hpp"
#include "specdec/math/warp.hpp"
#include "specdec/tree/token_tree.hpp"
#include "specdec/tree/tree_draft.hpp"
#include "specdec/types.hpp"

namespace specdec {

/// Options of a medusa_drafter; validated by its constructor.
struct medusa_drafter_options {
  /// Tree nodes besides the root, at most; 0 = the full shape the decoder asks for. Within the
  /// shape, the nodes kept are those with the highest product of the heads' measured rank
  /// accuracies along their path (medusa_weights::rank_accuracy; 1 / (rank + 1) when absent):
  /// Medusa's sparse trees.
  std::size_t max_nodes = 0;
  /// Candidates under sampling (greedy decoding always takes the top ones).
  head_candidates candidates = head_candidates::sampled;
  /// The engine's threads for the shared classifier's product (draft_threads; default none).
  /// The drafts do not depend on it.
  draft_threads threads{};
};

namespace detail {
// One node of a rank tree: its parent (-1: the root), depth (1 = a child of the root) and rank.
struct rank_node {
  std::int32_t parent;
  std::size_t depth;
  std::size_t rank;
};

// A candidate node of best_rank_tree.
struct rank_candidate {
  double score;
  std::size_t depth, rank;
  std::int32_t parent;  // index into the chosen nodes, -1 = root
};

// Scratch of best_rank_tree, reused so that a recomputed tree allocates nothing once grown.
struct rank_tree_workspace {
  std::vector<rank_candidate> queue, chosen;
  std::vector<std::int32_t> new_index, level;
};

// The rank tree of `branching` (each node at depth j has up to branching[j] children, ranks
// 0..k-1), cut to the `max_nodes` nodes of highest score (product of accuracy(j, r) along the
// path), grown best first so that it is closed under ancestors and lower-ranked siblings. Writes
// the nodes into `out` in breadth-first order with contiguous children (the root is not listed).
template <class Accuracy>
void best_rank_tree(std::span<const std::size_t> branching, std::size_t max_nodes,
                    Accuracy&& accuracy, rank_tree_workspace& ws, std::vector<rank_node>& out) {
  using cand = rank_candidate;
  // A max-heap on `better`: the best candidate first.
  const auto worse = [](const cand& a, const cand& b) {
    if (a.score != b.score) return a.score < b.score;
    if (a.depth != b.depth) return a.depth > b.depth;
    return a.rank > b.rank;
  };
  auto& queue = ws.queue;
  auto& chosen = ws.chosen;
  const auto push = [&](const cand& c) {
    queue.push_back(c);
    std::push_heap(queue.begin(), queue.end(), worse);
  };
  queue.clear();
  chosen.clear();
  out.clear();
  if (!branching.empty() && branching[0] > 0) push({accuracy(0, 0), 1, 0, -1});
  while (!queue.empty() && chosen.size() < max_nodes) {
    std::pop_heap(queue.begin(), queue.end(), worse);
    const cand c = queue.back();
    queue.pop_back();
    chosen.push_back(c);
    const auto me = static_cast<std::int32_t>(chosen.size() - 1);
    const double base = c.parent < 0 ? 1.0 : chosen[static_cast<std::size_t>(c.parent)].score;
    if (c.rank + 1 < branching[c.depth - 1])  // the next sibling
      push({base * accuracy(c.depth - 1, c.rank + 1), c.depth, c.rank + 1, c.parent});
    if (c.depth < branching.size() && branching[c.depth] > 0)  // the first child
      push({c.score * accuracy(c.depth, 0), c.depth + 1, 0, me});
  }
  // Breadth first: by depth, then by parent's new index, then by rank.
  auto& new_index = ws.new_index;
  auto& level = ws.level;
  new_index.assign(chosen.size(), -1);
  out.reserve(chosen.size());
  for (std::size_t depth = 1; depth <= branching.size(); ++depth) {
    level.clear();
    for (std::size_t i = 0; i < chosen.size(); ++i)
      if (chosen[i].depth == depth) level.push_back(static_cast<std::int32_t>(i));
    std::sort(level.begin(), level.end(), [&](std::int32_t a, std::int32_t b) {
      const cand &x = chosen[static_cast<std::size_t>(a)], &y = chosen[static_cast<std::size_t>(b)];
      const std::int32_t px = x.parent < 0 ? -1 : new_index[static_cast<std::size_t>(x.parent)];
      const std::int32_t py = y.parent < 0 ? -1 : new_index[static_cast<std::size_t>(y.parent)];
      return px != py ? px < py : x.rank < y.rank;
    });
    for (std::int32_t i : level) {
      const cand& c = chosen[static_cast<std::size_t>(i)];
      new_index[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(out.size());
      out.push_back({c.parent < 0 ? -1 : new_index[static_cast<std::size_t>(c.parent)], depth,
                     c.rank});
    }
  }
}

// best_rank_tree returning the nodes (allocates).
template <class Accuracy>
std::vector<rank_node> best_rank_tree(std::span<const std::size_t> branching,
                                      std::size_t max_nodes, Accuracy&& accuracy) {
  rank_tree_workspace ws;
  std::vector<rank_node> out;
  best_rank_tree(branching, max_nodes, accuracy, ws, out);
  return out;
}
}  // namespace detail

/**
 * Drafts with Medusa heads (medusa_heads.hpp) on the hidden row of the last committed position,
 * read from `source` (a hidden_capture around the target): head k proposes the token k + 1
 * places after the pending last history token, so a chain of K drafts uses heads 0..K-1 (at
 * most H drafts). Costs, per step, one d x d block per head used and one product with the
 * target's classifier for all the heads that share it (its weights read once), no model call.
 * A row processor (sampling_params::processor) rewrites a copy of each head row for the prefix
 * it is used at (in a tree, each parent's own copy: candidates are then per parent, not per
 * depth).
 *
 * Trees (TreeDrafter): every node at depth j gets the candidates of head j - 1 (Medusa's
 * cartesian trees): its top k_j tokens when greedy or with head_candidates::top
 * (deterministic), or k_j draws from the head's warped distribution (i.i.d. or without
 * replacement, as asked) with head_candidates::sampled. `max_nodes` cuts the shape to a sparse
 * tree chosen from the heads' measured accuracy. The heads do not see the drafted tokens, so
 * all nodes at one depth share candidates.
 *
 * When the target does not hold the history minus its last token (e.g. the first step after a
 * one-token prompt), it proposes nothing. A hidden row with NaN or infinity throws
 * std::invalid_argument (the decoder is still usable). Not thread-safe; `source` and the
 * classifier's memory must outlive the drafter.
 */
template <class Source>
class medusa_drafter {
  static_assert(detail::hidden_row_source<Source>,
                "specdec::medusa_drafter: the source must hand out hidden rows (size(), "
                "hidden_size(), vocab_size(), hidden(position), tokens()): wrap the target in "
                "specdec::hidden_capture, which needs a specdec::HiddenStateModel");

 public:
  /// Throws std::invalid_argument when the weights do not fit the source's hidden width and
  /// vocabulary (check_medusa_weights).
  medusa_drafter(Source& source, medusa_weights weights, weight_view target_classifier,
                 medusa_drafter_options options = {})
      : source_(source), w_(std::move(weights)), classifier_(target_classifier), o_(options) {
    check_medusa_weights(w_, source_.hidden_size(), source_.vocab_size(), classifier_);
  }

  std::size_t heads() const noexcept { return w_.size(); }
  const medusa_weights& weights() const noexcept { return w_; }
  std::size_t vocab_size() const { return static_cast<std::size_t>(source_.vocab_size()); }

  void reset() noexcept {}
  /// Drafter's optional reserve: passed on to the source when it has reserve(n) (room for the
  /// hidden rows of a history of n tokens), so that a warm step does not grow it.
  void reserve(std::size_t n) {
    if constexpr (requires { source_.reserve(n); }) source_.reserve(n);
    prefixes_.reserve(n);
  }
  void accept(std::span<const token_id> /*committed*/) noexcept {}

  /// Up to min(k, H) drafts from heads 0..: see the class comment.
  void propose(std::span<const token_id> history, std::size_t k, const sampling_params& sp,
               rng& gen, draft& out) {
    out.clear();
    const std::size_t n = std::min(k, heads());
    if (n == 0 || !head_logits(history, n)) return;
    const std::size_t v = vocab_size();
    const bool top = sp.greedy() || o_.candidates == head_candidates::top;
    if (!top) out.q.resize(static_cast<Eigen::Index>(n), static_cast<Eigen::Index>(v));
    if (sp.processor) prefixes_.begin(history);  // + the drafts, one by one
    for (std::size_t j = 0; j < n; ++j) {
      if (j > 0 && sp.processor) prefixes_.push(out.tokens.back());
      const std::span<const float> row = detail::draft_row(
          sp.processor, prefixes_.view(),
          std::span<const float>(logits_.row(static_cast<Eigen::Index>(j)).data(), v), processed_);
      if (row.empty()) break;  // the processor's dead end: nothing to draft past it
      if (top) {
        out.tokens.push_back(argmax(row));
      } else {
        std::span<float> q(out.q.row(static_cast<Eigen::Index>(j)).data(), v);
        warp(row, sp, q, ws_);
        out.tokens.push_back(draft_draw(q, sp, history.size() + j, gen, coupled_ws_));
      }
    }
  }

  /// Drafter's optional rehearse, which calibrate times as the drafting cost: the work of one
  /// drafting level of n nodes (a chain's level is 1) on placeholder inputs: one head's logits
  /// for a zero hidden row and a softmax per node. Changes nothing a later propose reads.
  void rehearse(std::size_t n) {
    if (n == 0 || heads() == 0) return;
    const std::size_t v = vocab_size();
    rehearsal_.setZero(static_cast<Eigen::Index>(source_.hidden_size()));
    medusa_logits(w_, 0, rehearsal_, classifier_, r_, out_row_);
    probs_.resize(v);
    for (std::size_t i = 0; i < n; ++i)
      softmax(std::span<const float>(out_row_.data(), v), probs_);
  }

  /// TreeDrafter: see the class comment. `draw` must be iid or without_replacement when
  /// sampling with head_candidates::sampled. Throws std::invalid_argument, before drafting, when
  /// the tree it would draft (the first min(H, branching.size()) levels of the shape, cut to
  /// max_nodes) has more than max_tree_nodes nodes.
  void propose_tree(std::span<const token_id> history, std::span<const std::size_t> branching,
                    const sampling_params& sp, rng& gen, candidate_draw draw, tree_draft& out) {
    const std::size_t v = vocab_size();
    const bool top = sp.greedy() || o_.candidates == head_candidates::top;
    if (!top && draw == candidate_draw::deterministic)
      throw std::invalid_argument(
          "medusa_drafter::propose_tree: draw must be iid or without_replacement when sampling");
    out.draw = top ? candidate_draw::deterministic : draw;
    out.q.resize(0, static_cast<Eigen::Index>(v));
    tokens_.assign(1, history.empty() ? 0 : history.back());
    parents_.assign(1, -1);
    const std::size_t depth = std::min(branching.size(), heads());
    const auto shape = branching.first(depth);
    // The full shape's nodes, saturated: a shape whose count overflows is just "too many".
    const std::size_t full = shape_nodes(shape);
    const std::size_t budget = o_.max_nodes == 0 ? full : std::min(full, o_.max_nodes);
    if (budget >= max_tree_nodes)
      throw std::invalid_argument(
          "medusa_drafter::propose_tree: the shape " + detail::shape_name(shape) +
          " has more nodes than max_tree_nodes = " + std::to_string(max_tree_nodes) +
          "; set medusa_drafter_options::max_nodes or draft a smaller shape");
    if (depth == 0 || !head_logits(history, depth)) {
      out.tree.assign(tokens_, parents_);
      return;
    }
    if (shape_.empty() || !std::equal(shape.begin(), shape.end(), shape_key_.begin(),
                                      shape_key_.end())) {
      shape_key_.assign(shape.begin(), shape.end());
      detail::best_rank_tree(
          shape, budget,
          [&](std::size_t j, std::size_t r) {
            const auto& a = w_.rank_accuracy;
            if (static_cast<Eigen::Index>(j) < a.rows() && static_cast<Eigen::Index>(r) < a.cols())
              return static_cast<double>(
                         a(static_cast<Eigen::Index>(j), static_cast<Eigen::Index>(r))) +
                     1e-9;
            return 1.0 / static_cast<double>((r + 1) * (j + 1));
          },
          rank_ws_, shape_);
    }
    // Candidates per depth: the top ones, or draws per parent. With a row processor the rows
    // depend on the prefix, so each parent gets its own processed row (below) instead.
    const bool per_parent = static_cast<bool>(sp.processor);
    if (per_parent) {
      prefixes_.begin(history);
      q_.resize(static_cast<Eigen::Index>(shape_.size() + 1), static_cast<Eigen::Index>(v));
    } else if (top) {
      for (std::size_t j = 0; j < depth; ++j) {
        const std::span<const float> row(logits_.row(static_cast<Eigen::Index>(j)).data(), v);
        detail::top_tokens(row, branching[j], top_[j]);
      }
    } else {
      q_.resize(static_cast<Eigen::Index>(depth), static_cast<Eigen::Index>(v));
      for (std::size_t j = 0; j < depth; ++j)
        warp(std::span<const float>(logits_.row(static_cast<Eigen::Index>(j)).data(), v), sp,
             std::span<float>(q_.row(static_cast<Eigen::Index>(j)).data(), v), ws_);
    }
    // Shape node i -> tree node (or -1 when its parent or rank does not exist this time).
    node_of_.assign(shape_.size(), -1);
    std::int32_t drawn_for = -2;  // the parent whose children were drawn last
    for (std::size_t i = 0; i < shape_.size(); ++i) {
      const detail::rank_node& s = shape_[i];
      const std::int32_t parent =
          s.parent < 0 ? 0 : node_of_[static_cast<std::size_t>(s.parent)];
      if (parent < 0) continue;
      const std::size_t j = s.depth - 1;
      if ((per_parent || !top) && drawn_for != parent) {  // all of this parent's children
        drawn_for = parent;
        std::size_t count = 0;
        for (std::size_t t = i; t < shape_.size() && shape_[t].parent == s.parent; ++t) ++count;
        // Row of q_ the children are drawn from: the depth's, or (processed) the parent's own.
        const auto q_row = static_cast<Eigen::Index>(per_parent ? parent : j);
        if (per_parent) {
          const std::span<const float> row = detail::draft_row(
              sp.processor, prefixes_.then_path(tokens_, parents_, static_cast<std::size_t>(parent)),
              std::span<const float>(logits_.row(static_cast<Eigen::Index>(j)).data(), v),
              processed_);
          if (row.empty()) {  // the processor's dead end: this parent gets no children
            drawn_.clear();
            continue;
          }
          if (top) detail::top_tokens(row, branching[j], drawn_);
          else warp(row, sp, std::span<float>(q_.row(q_row).data(), v), ws_);
        }
        if (!top)
          draft_candidates(std::span<const float>(q_.row(q_row).data(), v), count, draw, sp,
                           history.size() + j, gen, drawn_, remaining_, coupled_ws_);
      }
      const std::vector<token_id>& cands = top && !per_parent ? top_[j] : drawn_;
      if (s.rank >= cands.size()) continue;
      node_of_[i] = static_cast<std::int32_t>(tokens_.size());
      tokens_.push_back(cands[s.rank]);
      parents_.push_back(parent);
    }
    out.tree.assign(tokens_, parents_);
    if (!top) {  // row of node i: the distribution of its children (head depth(i)'s, processed
                 // for node i when per_parent; rows of nodes without children are unused)
      out.q.resize(static_cast<Eigen::Index>(out.tree.size()), static_cast<Eigen::Index>(v));
      for (std::size_t i = 0; i < out.tree.size(); ++i) {
        const auto j = static_cast<std::size_t>(out.tree.depth(i));
        const bool parent = !out.tree.children(i).empty();
        if (per_parent && parent)
          out.q.row(static_cast<Eigen::Index>(i)) = q_.row(static_cast<Eigen::Index>(i));
        else if (!per_parent && j < depth)
          out.q.row(static_cast<Eigen::Index>(i)) = q_.row(static_cast<Eigen::Index>(j));
        else out.q.row(static_cast<Eigen::Index>(i)).setZero();
      }
    }
  }

 private:
  // logits_ rows 0..n-1 = heads 0..n-1 on the start row; false when there is none.
  bool head_logits(std::span<const token_id> history, std::size_t n) {
    const std::span<const float> row = detail::start_row(source_, history, "medusa_drafter");
    if (row.empty()) return false;
    const Eigen::Map<const prob_row> hidden(row.data(), static_cast<Eigen::Index>(row.size()));
    const auto rows = static_cast<Eigen::Index>(n);
    logits_.resize(rows, static_cast<Eigen::Index>(vocab_size()));
    // The heads that share the target's classifier are multiplied with it in one product, so a
    // step reads it once (with a large vocabulary it is the biggest matrix of a step); a head
    // with its own classifier reads that.
    detail::fit_rows(shared_, rows, hidden.size());
    shared_heads_.clear();
    for (std::size_t j = 0; j < n; ++j) {
      if (w_.heads[j].classifier.size() != 0) {
        medusa_logits(w_, j, hidden, classifier_, r_, out_row_);
        logits_.row(static_cast<Eigen::Index>(j)) = out_row_;
        continue;
      }
      medusa_block(w_, j, hidden, r_);
      shared_.row(static_cast<Eigen::Index>(shared_heads_.size())) = r_ / w_.input_scale;
      shared_heads_.push_back(j);
    }
    const auto shared = static_cast<Eigen::Index>(shared_heads_.size());
    detail::fit_rows(shared_logits_, shared, classifier_.rows());
    detail::times_weights(shared_.topRows(shared), classifier_, shared_logits_.topRows(shared),
                          false, o_.threads);
    for (Eigen::Index i = 0; i < shared; ++i)
      logits_.row(static_cast<Eigen::Index>(shared_heads_[static_cast<std::size_t>(i)])) =
          shared_logits_.row(i);
    if (top_.size() < n) top_.resize(n);
    return true;
  }

  Source& source_;
  medusa_weights w_;
  weight_view classifier_;
  medusa_drafter_options o_;
  prob_rows logits_, q_;  // storage that only grows: a shorter step allocates nothing
  prob_row r_, out_row_, rehearsal_;
  // The blocks of the heads that share the target's classifier, their logits and which heads
  // they are; the matrices keep their largest row count.
  row_matrix shared_, shared_logits_;
  std::vector<std::size_t> shared_heads_;
  std::vector<float> probs_;  // rehearse's softmax
  warp_workspace ws_;
  detail::prefix_buffer prefixes_;  // what the row processor is given
  std::vector<float> processed_;    // a head row rewritten by the row processor
  coupled_workspace coupled_ws_;    // coupled draws (sampling_params::coupled)
  std::vector<std::vector<token_id>> top_;
  std::vector<token_id> tokens_, drawn_;
  std::vector<std::int32_t> parents_, node_of_;
  std::vector<float> remaining_;
  std::vector<std::size_t> shape_key_;
  std::vector<detail::rank_node> shape_;
  detail::rank_tree_workspace rank_ws_;
};

}  // namespace specdec
