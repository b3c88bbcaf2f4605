// specdec/draft/eagle_drafter.hpp - EAGLE-style drafting: the feature predictor (eagle_head.hpp)
// runs on its own predictions, the target's classifier turns each predicted hidden state into a
// token; chains, and trees that grow the most confident nodes first (EAGLE-2).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "specdec/concepts/drafter.hpp"
#include "specdec/detail/confidence_tree.hpp"
#include "specdec/detail/draft_heads.hpp"
#include "specdec/detail/weight_product.hpp"
#include "specdec/draft/draft_threads.hpp"
#include "specdec/draft/eagle_head.hpp"
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

/// Options of an eagle_drafter; validated by its constructor.
struct eagle_drafter_options {
  /// Tree nodes besides the root, at most; 0 = the full shape the decoder asks for.
  std::size_t max_nodes = 0;
  /// Nodes of each level that get children (the most confident ones); 0 = all (>= 0).
  std::size_t expand = 4;
  /// Candidates under sampling (greedy decoding always takes the top ones).
  head_candidates candidates = head_candidates::sampled;
  /// The engine's threads for the heads' products (draft_threads; default none). The drafts do
  /// not depend on it.
  draft_threads threads{};
};

/**
 * Drafts with an EAGLE-style feature predictor on the hidden row of the last committed position
 * (read from `source`, a hidden_capture around the target): from that row and the embedding of
 * the pending last history token it predicts the next hidden state, the target's classifier
 * gives the first draft token, and the predictor runs again on its own prediction and that
 * token's embedding. Cost per drafted token: one predictor step and one classifier product
 * (V x d), no model call.
 *
 * Trees (TreeDrafter), level by level up to the decoder's depth: the `expand` nodes of a level
 * with the highest path confidence (product of the draft probabilities along the path) each get
 * k_j children in one batched step: their top k_j tokens when greedy or with
 * head_candidates::top, or k_j draws from their warped distribution (i.i.d. or without
 * replacement) with head_candidates::sampled. With top candidates the tree is then cut to the
 * `max_nodes` most confident nodes (EAGLE-2's re-ranking; closed under ancestors); with sampled
 * candidates the budget is spent while expanding (nodes are never dropped after being drawn,
 * which would bias them).
 *
 * With an attention layer (eagle_weights::attention), each step also attends to the keys of the
 * committed context (eagle_context: computed once per committed position, from the target's
 * true rows) and of its own path of drafted steps (a tree node: its ancestors'); its cost grows
 * by O((context + depth) x heads x width) per drafted token.
 *
 * Proposes nothing when the target does not hold the history minus its last token; throws
 * std::invalid_argument for a hidden row with NaN or infinity. Not thread-safe; `source` and
 * the matrices' memory must outlive the drafter.
 */
template <class Source>
class eagle_drafter {
  static_assert(detail::hidden_row_source<Source>,
                "specdec::eagle_drafter: the source must hand out hidden rows (size(), "
                "hidden_size(), vocab_size(), hidden(position), tokens()): wrap the target in "
                "specdec::hidden_capture, which needs a specdec::HiddenStateModel");

 public:
  /// `classifier` and `embedding` are the target's (V x d each). Throws std::invalid_argument
  /// for weights or matrices that do not fit the source's width and vocabulary.
  eagle_drafter(Source& source, eagle_weights weights, weight_view classifier,
                weight_view embedding, eagle_drafter_options options = {})
      : source_(source), w_(std::move(weights)), classifier_(classifier), embedding_(embedding),
        o_(options) {
    const std::size_t d = source_.hidden_size(), v = source_.vocab_size();
    check_eagle_weights(w_, d);
    for (const auto* m : {&classifier_, &embedding_})
      if (m->rows() != static_cast<Eigen::Index>(v) || m->cols() != static_cast<Eigen::Index>(d))
        throw std::invalid_argument(
            std::string("eagle_drafter: the target's ") +
            (m == &classifier_ ? "classifier" : "embedding") + " is " +
            std::to_string(m->rows()) + " x " + std::to_string(m->cols()) + ", expected vocab " +
            std::to_string(v) + " x hidden width " + std::to_string(d));
  }

  const eagle_weights& weights() const noexcept { return w_; }
  std::size_t vocab_size() const { return static_cast<std::size_t>(source_.vocab_size()); }

  void reset() noexcept { context_.clear(); }
  /// Drafter's optional reserve: passed on to the source when it has reserve(n) (room for the
  /// hidden rows of a history of n tokens), so that a warm step does not grow it.
  /// The attention layer's context and scores are sized for n positions too.
  void reserve(std::size_t n) {
    if constexpr (requires { source_.reserve(n); }) source_.reserve(n);
    prefixes_.reserve(n);
    if (w_.attention.enabled()) {
      context_.reserve(n, w_.attention);
      scores_.reserve(2 * n);  // the context and a path of drafts, each at most n
    }
  }
  void accept(std::span<const token_id> /*committed*/) noexcept {}

  /// A chain of k drafts (see the class comment).
  void propose(std::span<const token_id> history, std::size_t k, const sampling_params& sp,
               rng& gen, draft& out) {
    out.clear();
    if (k == 0 || !start(history)) return;
    const std::size_t v = vocab_size();
    const bool top = sp.greedy() || o_.candidates == head_candidates::top;
    if (!top) out.q.resize(static_cast<Eigen::Index>(k), static_cast<Eigen::Index>(v));
    token_id t = history.back();
    tree_.reset(t);
    if (sp.processor) prefixes_.begin(history);  // + the drafts, one by one
    for (std::size_t j = 0; j < k; ++j) {
      step_rows(std::span<const token_id>(&t, 1), std::span<const std::size_t>(&j, 1));
      f_.swap(next_);
      if (j > 0 && sp.processor) prefixes_.push(t);
      const std::span<const float> row = detail::draft_row(
          sp.processor, prefixes_.view(), std::span<const float>(logits_.data(), v), processed_);
      if (row.empty()) break;  // the processor's dead end: nothing to draft past it
      if (top) {
        t = argmax(row);
      } else {
        std::span<float> q(out.q.row(static_cast<Eigen::Index>(j)).data(), v);
        warp(row, sp, q, ws_);
        t = draft_draw(q, sp, history.size() + j, gen, coupled_ws_);
      }
      out.tokens.push_back(t);
      tree_.nodes.push_back({t, static_cast<std::int32_t>(j), j + 1, 1.0, 0});
    }
  }

  /// Drafter's optional rehearse, which calibrate times as the drafting cost: the work of one
  /// drafting level of n nodes (a chain's level is 1) on placeholder inputs: one predictor step
  /// for n rows, the classifier product and a softmax per row. The attention layer, whose cost
  /// grows with the context, is left out. Changes nothing a later propose reads (the buffers it
  /// uses are rewritten by every propose); may grow them.
  void rehearse(std::size_t n) {
    if (n == 0) return;
    const auto rows = static_cast<Eigen::Index>(n);
    const auto d = static_cast<Eigen::Index>(source_.hidden_size());
    detail::fit_rows(f_, rows, d);
    f_.topRows(rows).setZero();
    batch_tokens_.assign(n, 0);
    step_rows(batch_tokens_, {});
    const std::size_t v = vocab_size();
    rehearsal_.resize(v);
    for (Eigen::Index r = 0; r < rows; ++r)
      softmax(std::span<const float>(logits_.row(r).data(), v), rehearsal_);
  }

  /// TreeDrafter: see the class comment. `draw` must be iid or without_replacement when
  /// sampling with head_candidates::sampled. Throws std::invalid_argument, before drafting, when
  /// the tree would pass max_tree_nodes: the shape cut to max_nodes, or with top candidates the
  /// levels grown before the cut (expand nodes a level, at most V children each).
  void propose_tree(std::span<const token_id> history, std::span<const std::size_t> branching,
                    const sampling_params& sp, rng& gen, candidate_draw draw, tree_draft& out) {
    const std::size_t v = vocab_size();
    const bool top = sp.greedy() || o_.candidates == head_candidates::top;
    if (!top && draw == candidate_draw::deterministic)
      throw std::invalid_argument(
          "eagle_drafter::propose_tree: draw must be iid or without_replacement when sampling");
    out.draw = top ? candidate_draw::deterministic : draw;
    out.q.resize(0, static_cast<Eigen::Index>(v));
    tree_.reset(history.empty() ? 0 : history.back());
    const std::size_t budget = checked_budget(branching, top);
    if (branching.empty() || !start(history)) return tree_.write(out, q_rows_, !top, vocab_size());
    if (sp.processor) prefixes_.begin(history);
    // features_: row i = the predictor's input feature for node i (its parent's prediction).
    detail::fit_rows(features_, 1, f_.cols());
    features_.row(0) = f_.row(0);
    features_used_ = 1;
    feature_rows_.assign(1, 0);
    std::size_t level_begin = 0, level_end = 1, drafted = 0;
    for (std::size_t j = 0; j < branching.size() && level_begin < level_end; ++j) {
      // The most confident nodes of this level, in index order (children stay breadth first).
      expanded_.resize(level_end - level_begin);
      std::iota(expanded_.begin(), expanded_.end(), level_begin);
      const std::size_t keep = o_.expand == 0 ? expanded_.size() : std::min(o_.expand, expanded_.size());
      std::sort(expanded_.begin(), expanded_.end(), [&](std::size_t a, std::size_t b) {
        // stable: ties keep index order (std::stable_sort would allocate its buffer)
        return tree_.nodes[a].score != tree_.nodes[b].score ? tree_.nodes[a].score > tree_.nodes[b].score : a < b;
      });
      expanded_.resize(keep);
      std::sort(expanded_.begin(), expanded_.end());
      if (!top) {  // sampled: spend the budget now, never drop a drawn node later
        std::size_t room = budget - drafted, n = 0;
        while (n < expanded_.size() && room > 0) room -= std::min(room, branching[j]), ++n;
        expanded_.resize(n);
      }
      if (expanded_.empty()) break;
      // One batched step for the expanded nodes.
      const auto b = static_cast<Eigen::Index>(expanded_.size());
      detail::fit_rows(f_, b, f_.cols());
      batch_tokens_.resize(expanded_.size());
      for (Eigen::Index r = 0; r < b; ++r) {
        const std::size_t node = expanded_[static_cast<std::size_t>(r)];
        f_.row(r) = features_.row(static_cast<Eigen::Index>(feature_rows_[node]));
        batch_tokens_[static_cast<std::size_t>(r)] = tree_.nodes[node].token;
      }
      step_rows(batch_tokens_, expanded_);
      const Eigen::Index first_feature = features_used_;
      features_used_ += b;
      if (features_.rows() < features_used_)  // grows to the largest tree, then stays
        features_.conservativeResize(std::max(features_used_, 2 * features_.rows()),
                                     Eigen::NoChange);
      features_.middleRows(first_feature, b) = next_.topRows(b);
      // Row first_q + r of q_rows_: the distribution of expanded node r's children. The rows
      // are kept between calls: only a larger tree than any before allocates.
      const Eigen::Index first_q = q_used_;
      q_used_ += b;
      if (q_rows_.rows() < q_used_)
        q_rows_.conservativeResize(q_used_, static_cast<Eigen::Index>(v));
      for (Eigen::Index r = 0; r < b && (top || drafted < budget); ++r) {
        const std::size_t node = expanded_[static_cast<std::size_t>(r)];
        const std::span<const float> row = detail::draft_row(
            sp.processor,
            sp.processor ? node_prefix(node) : std::span<const token_id>(),
            std::span<const float>(logits_.row(r).data(), v), processed_);
        tree_.nodes[node].q_row = first_q + r;
        std::span<float> p(q_rows_.row(first_q + r).data(), v);
        if (row.empty()) {  // the processor's dead end: no children (a q row nobody reads)
          std::fill(p.begin(), p.end(), 0.0f);
          continue;
        }
        std::size_t count = branching[j];
        if (top) {
          softmax(row, p);
          detail::top_tokens(row, count, drawn_);
        } else {
          warp(row, sp, p, ws_);
          count = std::min(count, budget - drafted);
          draft_candidates(p, count, draw, sp, history.size() + j, gen, drawn_, remaining_,
                           coupled_ws_);
        }
        for (token_id t : drawn_) {
          const double conf = tree_.nodes[node].score * static_cast<double>(p[static_cast<std::size_t>(t)]);
          tree_.nodes.push_back({t, static_cast<std::int32_t>(node), j + 1, conf, 0});
          feature_rows_.push_back(static_cast<std::size_t>(first_feature + r));
          ++drafted;
        }
      }
      level_begin = level_end;
      level_end = tree_.nodes.size();
    }
    if (top && tree_.nodes.size() - 1 > budget) tree_.prune(budget);
    tree_.write(out, q_rows_, !top, vocab_size());
  }

 private:
  // History + the tokens from the root's child down to `node` (the row processor's prefix).
  std::span<const token_id> node_prefix(std::size_t node) {
    return prefixes_.then_walk(
        node, [&](std::size_t at) { return tree_.nodes[at].token; },
        [&](std::size_t at) { return tree_.nodes[at].parent; });
  }

  // The nodes (root excluded) this call may keep: max_nodes, or the full shape's (saturated).
  // Throws std::invalid_argument when the tree it keeps, or grows before pruning, would pass
  // max_tree_nodes: the full shape with top candidates (at most V per node) under the nodes
  // `expand` lets grow, or the budget when sampling (never more drawn).
  std::size_t checked_budget(std::span<const std::size_t> branching, bool top) const {
    const std::size_t full = shape_nodes(branching);
    const std::size_t budget = o_.max_nodes == 0 ? full : std::min(full, o_.max_nodes);
    const auto fail = [&](const std::string& why) {
      throw std::invalid_argument("eagle_drafter::propose_tree: the shape " +
                                  detail::shape_name(branching) + why);
    };
    if (budget >= max_tree_nodes)
      fail(" has more nodes than max_tree_nodes = " + std::to_string(max_tree_nodes) +
           "; set eagle_drafter_options::max_nodes or draft a smaller shape");
    if (!top) return budget;
    // Grown before pruning: level j + 1 has (expanded nodes of level j) x min(k_j, V) nodes.
    const std::size_t cap = max_tree_nodes, v = vocab_size();
    std::size_t grown = 0, width = 1;
    for (const std::size_t k : branching) {
      const std::size_t parents = o_.expand == 0 ? width : std::min(width, o_.expand);
      const std::size_t kids = std::min(k, v);  // top_tokens gives at most V
      width = kids != 0 && parents > cap / kids ? cap : parents * kids;
      grown = width >= cap - grown ? cap : grown + width;
      if (grown >= cap)
        fail(" would grow more nodes than max_tree_nodes = " + std::to_string(cap) +
             " (expand = " + std::to_string(o_.expand) +
             "); set eagle_drafter_options::expand or draft a smaller shape");
    }
    return budget;
  }


  // f_ <- input_scale x the start row, and the attention's context brought up to it; false
  // when there is no start row.
  bool start(std::span<const token_id> history) {
    const std::span<const float> row = detail::start_row(source_, history, "eagle_drafter");
    if (row.empty()) return false;
    if (w_.attention.enabled())
      context_.sync(source_, history.size() - 2, w_.attention, w_.input_scale, embedding_,
                    "eagle_drafter");
    detail::fit_rows(f_, 1, static_cast<Eigen::Index>(row.size()));
    f_.row(0) = Eigen::Map<const prob_row>(row.data(), static_cast<Eigen::Index>(row.size())) *
                w_.input_scale;
    root_position_ = history.size() - 2;
    q_used_ = 0;
    steps_used_ = 0;
    node_step_.clear();
    return true;
  }

  // next_ <- one predictor step on f_ (one row per token, row r expanding node nodes[r]) and
  // the tokens' embeddings; logits_ <- the target's classifier on next_ / input_scale.
  // Without `nodes` (rehearse), no attention.
  void step_rows(std::span<const token_id> tokens, std::span<const std::size_t> nodes) {
    // Every buffer keeps its largest row count; a step uses its top n rows.
    const auto n = static_cast<Eigen::Index>(tokens.size()), d = f_.cols();
    detail::fit_rows(e_, n, d);
    for (std::size_t i = 0; i < tokens.size(); ++i)
      e_.row(static_cast<Eigen::Index>(i)) = embedding_.row(tokens[i]);
    detail::fit_rows(z_, n, w_.w1.rows());
    detail::fit_rows(next_, n, d);
    eagle_step(w_, f_.topRows(n), e_.topRows(n), z_.topRows(n), next_.topRows(n), o_.threads);
    if (w_.attention.enabled() && !nodes.empty()) add_attention(nodes);
    detail::fit_rows(scaled_, n, d);
    scaled_.topRows(n) = next_.topRows(n) / w_.input_scale;
    detail::fit_rows(logits_, n, classifier_.rows());
    detail::times_weights(scaled_.topRows(n), classifier_, logits_.topRows(n), false, o_.threads);
  }

  // next_ += Wo a for the rows of step_rows: each row's query attends to the context and to the
  // steps of its node's path (the ancestors' steps, then its own, whose key and value it adds).
  void add_attention(std::span<const std::size_t> nodes) {
    const eagle_attention& a = w_.attention;
    const auto b = static_cast<Eigen::Index>(nodes.size()), A = a.wq.rows(), d = f_.cols();
    detail::fit_rows(u_, b, 2 * d);
    const auto u = u_.topRows(b);
    u_.topRows(b).leftCols(d) = f_.topRows(b);
    u_.topRows(b).rightCols(d) = e_.topRows(b);
    detail::fit_rows(query_, b, A);
    detail::times_weights(u, a.wq, query_.topRows(b), false, o_.threads);
    const Eigen::Index first = steps_used_;
    steps_used_ += b;
    if (step_keys_.rows() < steps_used_) {
      step_keys_.conservativeResize(steps_used_, A);
      step_values_.conservativeResize(steps_used_, A);
    }
    detail::times_weights(u, a.wk, step_keys_.middleRows(first, b), false, o_.threads);
    detail::times_weights(u, a.wv, step_values_.middleRows(first, b), false, o_.threads);
    node_step_.resize(tree_.nodes.size(), -1);
    detail::fit_rows(attended_, b, A);
    for (Eigen::Index r = 0; r < b; ++r) {
      const std::size_t id = nodes[static_cast<std::size_t>(r)];
      node_step_[id] = first + r;
      const std::size_t position = root_position_ + tree_.nodes[id].depth;
      detail::rotate_heads(query_.row(r).data(), a, position);
      detail::rotate_heads(step_keys_.row(first + r).data(), a, position);
      path_.clear();
      for (auto x = static_cast<std::int32_t>(id); x >= 0;
           x = tree_.nodes[static_cast<std::size_t>(x)].parent)
        path_.push_back(node_step_[static_cast<std::size_t>(x)]);
      std::reverse(path_.begin(), path_.end());
      detail::attend(a, query_.row(r).data(), context_.keys(), context_.values(), step_keys_,
                     step_values_, path_, scores_, attended_.row(r).data());
    }
    detail::times_weights(attended_.topRows(b), a.wo, next_.topRows(b), true, o_.threads);
  }

  Source& source_;
  eagle_weights w_;
  weight_view classifier_, embedding_;
  eagle_drafter_options o_;
  // Buffers kept at their largest row count (fit); a step uses their top rows.
  row_matrix f_, next_, e_, z_, scaled_, logits_, features_, q_rows_;
  Eigen::Index features_used_ = 0;  // rows of features_ filled by this propose_tree
  Eigen::Index q_used_ = 0;  // rows of q_rows_ filled by this propose_tree
  // The attention layer's state: the committed context, and the steps drafted by this call.
  eagle_context context_;
  row_matrix u_, query_, step_keys_, step_values_, attended_;
  Eigen::Index steps_used_ = 0;
  std::size_t root_position_ = 0;           // the position of the root's step
  std::vector<Eigen::Index> node_step_, path_;  // a node's step row; one path's
  std::vector<float> scores_;
  warp_workspace ws_;
  detail::prefix_buffer prefixes_;  // what the row processor is given
  std::vector<float> processed_;    // a row rewritten by the row processor
  coupled_workspace coupled_ws_;    // coupled draws (sampling_params::coupled)
  detail::confidence_tree tree_;  // the nodes drafted by this call
  std::vector<std::size_t> feature_rows_, expanded_;
  std::vector<token_id> batch_tokens_, drawn_;
  std::vector<float> remaining_, rehearsal_;
};

}  // namespace specdec
