// specdec/draft/model_drafter.hpp - drafts with a smaller LanguageModel (classic speculative decoding).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "specdec/decode/adapter_checks.hpp"
#include "specdec/concepts/drafter.hpp"
#include "specdec/concepts/language_model.hpp"
#include "specdec/concepts/tree_language_model.hpp"
#include "specdec/math/rng.hpp"
#include "specdec/math/sample.hpp"
#include "specdec/math/softmax.hpp"
#include "specdec/math/sampling_params.hpp"
#include "specdec/math/row_processor.hpp"
#include "specdec/math/warp.hpp"
#include "specdec/tree/token_tree.hpp"
#include "specdec/tree/tree_draft.hpp"
#include "specdec/tree/tree_fallback.hpp"
#include "specdec/types.hpp"

namespace specdec {

namespace detail {
// The k largest entries of `row` (ties: lowest id first), largest first, in one pass keeping
// the best k seen so far: O(V * k) worst case, O(V) when k is small next to V. Allocates
// nothing once `out` has capacity k.
inline void top_tokens(std::span<const float> row, std::size_t k, std::vector<token_id>& out) {
  out.clear();
  k = std::min(k, row.size());
  if (k == 0) return;
  auto value = [&](token_id t) { return row[static_cast<std::size_t>(t)]; };
  for (std::size_t i = 0; i < row.size(); ++i) {
    const float x = row[i];
    // Ids grow along the scan, so a tie never displaces an earlier (lower) id.
    if (out.size() == k && !(x > value(out.back()))) continue;
    if (out.size() == k) out.pop_back();
    auto at = out.end();
    while (at != out.begin() && x > value(*(at - 1))) --at;
    out.insert(at, static_cast<token_id>(i));
  }
}
}  // namespace detail

/// What a model_drafter may change about how it drafts (validated by its constructor).
struct model_drafter_options {
  /// Confidence stop, in [0, 1]; 0 = off. A chain stops before the first position whose draft
  /// distribution's top probability is below p_min (that position and later ones are not
  /// drafted; the first position too, so a draft may be empty and the decoder then takes one
  /// plain step). The probability is the largest entry of the warped row q the token would be
  /// drawn from; under greedy sampling, where q is a point mass, the largest entry of the
  /// softmax of the raw logits (temperature 1). llama.cpp's --spec-draft-p-min and HF's
  /// assistant_confidence_threshold. Lossless: the stop reads only the draft's own distribution
  /// at that position, before its token is drawn, never the target; trees ignore it.
  float p_min = 0.0f;
};

/**
 * Drafts k tokens autoregressively from a draft model, warped exactly like the target
 * (same sampling_params), and keeps the q row each token was drawn from (none when greedy: the
 * drafts are then deterministic).
 *
 * The drafter owns the draft model's context: it remembers which tokens its cache holds and, on
 * each propose, rolls the cache back to the longest prefix still in the history (after a
 * rejection, that drops the rejected drafts) and feeds the missing tokens in one append. The
 * first propose after construction or reset() takes the model over as it finds it; after that,
 * a model whose size is no longer what the drafter left in it was used by someone else (it is
 * the target, or another drafter's), and propose throws std::logic_error without touching it.
 * A row processor (sampling_params::processor) rewrites each draft row before it is warped or
 * its argmax taken, given the history and the drafts before it (a copy: the cache's rows stay);
 * where it throws a std::exception, the draft ends before that row (detail::draft_row).
 * Cost per propose: one append of the tokens the history gained, then k - 1 single-token appends.
 * When the history gained more than refeed_rows tokens (a new prompt), all but the last go
 * through specdec::prefill (no logits; the model's prefill() when it has one) and the last
 * through append, so the drafter holds at most max(refeed_rows, k) rows of logits whatever the
 * prompt's length; a step's few accepted tokens stay one append (one call, a few rows nobody
 * reads). It keeps its buffers at their largest step and allocates nothing once warm.
 *
 * It also drafts token trees (TreeDrafter): level by level, each node at depth d gets k_{d+1}
 * children drawn from the draft distribution at that node, i.i.d. or without replacement (the
 * distribution renormalised after each draw), or, under greedy sampling, the node's k most
 * likely tokens (deterministic). Each level is one evaluation of the tree grown so far, through
 * the draft's append_tree when it models TreeLanguageModel, else path by path.
 * Not thread-safe. The model must outlive the drafter.
 */
template <class Model>
class model_drafter {
  // Chosen only when Model does not model LanguageModel: the static_assert names what is
  // missing, and the members below do nothing (the decoders refuse a drafter whose model() is
  // not a LanguageModel without a word), so that no further errors follow.
  static_assert(detail::check_language_model<Model>());

 public:
  explicit model_drafter(Model& model, model_drafter_options = {}) : model_(model) {}
  Model& model() noexcept { return model_; }
  void propose(std::span<const token_id>, std::size_t, const sampling_params&, rng&, draft&) {}
  void accept(std::span<const token_id>) noexcept {}
  void reset() {}

 private:
  Model& model_;
};

template <LanguageModel Model>
class model_drafter<Model> {
 public:
  /// Throws std::invalid_argument naming model_drafter_options.p_min when it is outside [0, 1].
  explicit model_drafter(Model& model, model_drafter_options options = {})
      : model_(model), options_(options) {
    if (!(options.p_min >= 0.0f && options.p_min <= 1.0f))
      throw std::invalid_argument("model_drafter_options.p_min: must be in [0, 1], got " +
                                  std::to_string(options.p_min));
  }

  const model_drafter_options& options() const noexcept { return options_; }
  /// Tokens the history may gain between proposes and still be fed in one append (with rows);
  /// more go through specdec::prefill but the last.
  static constexpr std::size_t refeed_rows = 32;

  Model& model() noexcept { return model_; }
  std::size_t vocab_size() const { return static_cast<std::size_t>(model_.vocab_size()); }
  /// Number of calls that fed the draft model since construction: each append (one per leaf when
  /// a tree level is evaluated path by path) and each append_tree.
  std::size_t model_calls() const noexcept { return calls_; }
  /// Drafter's optional reserve (called by the decoder once per generation): room for a draft
  /// context of n tokens in the drafter's own bookkeeping, so that its steps allocate nothing.
  /// The draft model's cache is the model's own business.
  void reserve(std::size_t n) {
    cached_.reserve(n);
    prefixes_.reserve(n);
  }

  /// Starts a new sequence: nothing about the next history is assumed.
  /// The cached context is kept: the next propose compares it with the new history once (O(its
  /// length)) and keeps the common prefix, so a new prompt sharing a prefix with the last
  /// sequence is not fed to the draft model again. If the draft model no longer holds what this
  /// drafter left in it, the next propose takes it over as it finds it (empties it and starts
  /// again) instead of reporting it.
  void reset() {
    verified_ = 0;
    owned_ = false;
  }

  /// Nothing to do: the next propose re-synchronises from the history in O(k).
  void accept(std::span<const token_id> /*committed*/) noexcept {}

  void propose(std::span<const token_id> history, std::size_t k, const sampling_params& sp,
               rng& gen, draft& out) {
    const std::size_t v = vocab_size();
    out.clear();
    if (k == 0 || history.empty()) return;
    const std::size_t capacity = max_size_of(model_);
    if (history.size() > capacity) return;  // the draft cannot hold this context: propose nothing
    k = std::min(k, capacity - history.size() + 1);

    // Roll the draft cache back to the longest prefix it shares with the history, keeping at
    // least one token to feed so that we get the logits after the last history token.
    const std::size_t common = sync(history.first(history.size() - 1));
    const std::span<const token_id> missing = history.subspan(common);
    if (missing.size() > refeed_rows) {  // a prompt: no rows but the last one
      feed_without_rows(missing.first(missing.size() - 1));
      feed(missing.last(1));
    } else {
      feed(missing);
    }

    out.tokens.reserve(k);
    if (!sp.greedy()) out.q.resize(static_cast<Eigen::Index>(k), static_cast<Eigen::Index>(v));
    if (sp.processor) prefixes_.begin(history);  // + the drafts, one by one
    for (std::size_t j = 0; j < k; ++j) {
      const std::span<const float> last = detail::draft_row(
          sp.processor, prefixes_.view(),
          std::span<const float>(logits_.data() + logits_.size() - v, v), processed_);
      if (last.empty()) break;  // the processor's dead end: nothing to draft past it
      token_id t;
      if (sp.greedy()) {
        if (options_.p_min > 0.0f && top_probability(last) < options_.p_min) break;
        t = argmax(last);
      } else {
        std::span<float> q(out.q.row(static_cast<Eigen::Index>(j)).data(), v);
        warp(last, sp, q, ws_);
        if (options_.p_min > 0.0f && *std::max_element(q.begin(), q.end()) < options_.p_min)
          break;
        t = draft_draw(q, sp, history.size() + j, gen, coupled_ws_);
      }
      out.tokens.push_back(t);
      if (sp.processor) prefixes_.push(t);
      if (j + 1 < k) feed(std::span<const token_id>(&out.tokens.back(), 1));
    }
    if (!sp.greedy() && out.tokens.size() < k)  // stopped early: q keeps the drafted rows
      out.q.conservativeResize(static_cast<Eigen::Index>(out.tokens.size()),
                               static_cast<Eigen::Index>(v));
  }

 /// TreeDrafter: a tree of shape `branching` (or smaller) under history.back(). See the class
  /// comment. `draw` must be iid or without_replacement; greedy sampling drafts top-k instead.
  void propose_tree(std::span<const token_id> history, std::span<const std::size_t> branching,
                    const sampling_params& sp, rng& gen, candidate_draw draw, tree_draft& out) {
    if (draw == candidate_draw::deterministic && !sp.greedy())
      throw std::invalid_argument(
          "model_drafter::propose_tree: draw must be iid or without_replacement when sampling");
    const std::size_t v = vocab_size();
    out.draw = sp.greedy() ? candidate_draw::deterministic : draw;
    out.q.resize(0, static_cast<Eigen::Index>(v));
    tokens_.assign(1, history.empty() ? 0 : history.back());
    parents_.assign(1, -1);
    const std::size_t capacity = max_size_of(model_);
    if (history.empty() || branching.empty() || history.size() > capacity) {
      out.tree.assign(tokens_, parents_);  // the root alone: nothing to draft
      return;
    }
    // The deepest node evaluated sits at position history.size() - 1 + depth - 1.
    const std::size_t depth = std::min(branching.size(), capacity - history.size() + 1);
    // The draft's context becomes the history without its last token: the root is fed in the tree.
    const std::size_t common = sync(history.first(history.size() - 1));
    if (common + 1 < history.size()) {  // no row of these is read
      feed_without_rows(history.subspan(common, history.size() - 1 - common));
    }
    std::size_t level_begin = 0, level_end = 1;
    if (sp.processor) prefixes_.begin(history);
    for (std::size_t d = 0; d < depth; ++d) {
      // Evaluate the tree grown so far, read the rows of its deepest level, drop the tree.
      tree_.assign(tokens_, parents_);  // in place: no allocation once grown
      logits_.resize(tree_.size() * v);
      calls_ += evaluate_tree(model_, tree_, std::span<float>(logits_), eval_ws_);
      commit_tree_path(model_, tree_, std::span<const std::int32_t>(), eval_ws_);  // no call
      if (!sp.greedy()) out.q.conservativeResize(static_cast<Eigen::Index>(tree_.size()),
                                                  static_cast<Eigen::Index>(v));
      for (std::size_t node = level_begin; node < level_end; ++node) {
        const std::span<const float> row = detail::draft_row(
            sp.processor,
            sp.processor ? prefixes_.then_path(tokens_, parents_, node)
                         : std::span<const token_id>(),
            std::span<const float>(logits_.data() + node * v, v), processed_);
        if (row.empty()) {  // the processor's dead end: no children (a q row nobody reads)
          if (!sp.greedy()) out.q.row(static_cast<Eigen::Index>(node)).setZero();
          continue;
        }
        if (sp.greedy()) {
          detail::top_tokens(row, branching[d], children_);
        } else {
          std::span<float> q(out.q.row(static_cast<Eigen::Index>(node)).data(), v);
          warp(row, sp, q, ws_);
          draft_candidates(q, branching[d], draw, sp, history.size() + d, gen, children_,
                           remaining_, coupled_ws_);
        }
        for (token_id t : children_) {
          tokens_.push_back(t);
          parents_.push_back(static_cast<std::int32_t>(node));
        }
      }
      level_begin = level_end;
      level_end = tokens_.size();
      if (level_begin == level_end) break;
    }
    out.tree.assign(tokens_, parents_);
    if (!sp.greedy())
      out.q.conservativeResize(static_cast<Eigen::Index>(out.tree.size()),
                               static_cast<Eigen::Index>(v));
  }

 private:
  // Rolls the draft's context back to its longest common prefix with `prefix` (O(length of the
  // part that changed)); the caller feeds what is missing. Returns the common length.
  // The drafter can see that its model was used by someone else only through its size: between
  // a reset() (or construction) and the first propose it takes the model over as it is (empties
  // it when the size is not what it left); after that, a size other than what it left means a
  // context shared with someone (the target, another drafter) and throws before touching it.
  std::size_t sync(std::span<const token_id> prefix) {
    const auto held = static_cast<std::size_t>(model_.size());
    if (held != cached_.size()) {
      if (owned_)
        throw std::logic_error("model_drafter: the draft model holds " + std::to_string(held) +
                               " tokens, not the " + std::to_string(cached_.size()) +
                               " this drafter left in it: something else used it (a draft "
                               "model needs a context of its own; after reset() the drafter "
                               "takes it over)");
      model_.truncate(0);
      cached_.clear();
      verified_ = 0;
    }
    owned_ = true;
    // History only grows between resets (Drafter contract): what matched before still matches.
    const std::size_t limit = std::min(cached_.size(), prefix.size());
    std::size_t common = std::min(verified_, limit);
    while (common < limit && cached_[common] == prefix[common]) ++common;
    detail::truncate_checked(model_, common, "model_drafter", "draft model");
    cached_.resize(common);
    verified_ = prefix.size();  // after the caller's feed, the cache holds all of `prefix`
    return common;
  }

  // The largest entry of softmax(row) (temperature 1): greedy drafting's confidence.
  static float top_probability(std::span<const float> row) {
    const float top = *std::max_element(row.begin(), row.end());
    return static_cast<float>(std::exp(static_cast<double>(top) - log_sum_exp(row)));
  }

  // specdec::prefill with logits_ as the scratch; a chunk that throws leaves the context as the
  // drafter knew it (what earlier chunks fed is truncated away).
  void feed_without_rows(std::span<const token_id> tokens) {
    try {
      calls_ += prefill(model_, tokens, logits_);
    } catch (...) {
      if (static_cast<std::size_t>(model_.size()) > cached_.size()) model_.truncate(cached_.size());
      throw;
    }
    cached_.insert(cached_.end(), tokens.begin(), tokens.end());
  }

  void feed(std::span<const token_id> tokens) {
    const std::size_t v = vocab_size();
    logits_.resize(tokens.size() * v);
    model_.append(tokens, std::span<float>(logits_));
    ++calls_;
    cached_.insert(cached_.end(), tokens.begin(), tokens.end());
  }

  Model& model_;
  model_drafter_options options_;
  std::vector<token_id> cached_;  // the tokens in the draft model's context, in lockstep with it
  std::size_t verified_ = 0;      // cached_[0, verified_) is known to equal the history
  bool owned_ = false;            // proposed since construction or reset(): the size is ours
  std::vector<float> logits_;
  warp_workspace ws_;
  detail::prefix_buffer prefixes_;  // what the row processor is given
  std::vector<float> processed_;    // a row rewritten by the row processor
  coupled_workspace coupled_ws_;    // coupled draws (sampling_params::coupled)
  std::size_t calls_ = 0;
  // tree drafting scratch
  token_tree tree_;
  tree_eval_workspace eval_ws_;
  std::vector<token_id> tokens_, children_;
  std::vector<std::int32_t> parents_;
  std::vector<float> remaining_;
};

}  // namespace specdec
