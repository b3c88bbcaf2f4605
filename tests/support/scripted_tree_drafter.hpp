// tests/support/scripted_tree_drafter.hpp - a TreeDrafter that drafts the full shape it is asked
// for, and can be told to break one rule of the TreeDrafter contract (to test that the decoder
// refuses the draft before the target sees it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include <specdec/concepts/drafter.hpp>
#include <specdec/math/rng.hpp>
#include <specdec/math/sample.hpp>
#include <specdec/math/sampling_params.hpp>
#include <specdec/tree/token_tree.hpp>
#include <specdec/tree/tree_draft.hpp>

namespace specdec::test {

// One broken rule per fault.
enum class tree_fault {
  none,
  q_short_columns,         // q has V - 1 columns
  q_short_rows,            // q has tree.size() - 1 rows
  deterministic_with_rows, // draw deterministic, yet q has rows
  bad_draw,                // a draw value outside the enum
  wrong_root,              // the root is not history.back()
  too_deep,                // one level deeper than asked
  too_wide,                // the root gets one child more than branching[0]
  duplicate_siblings,      // without_replacement with two equal siblings
  zero_q_child,            // a sampled child whose token has q = 0 in its parent's row
  chain_q_short_columns,   // a sampled chain whose q has V - 1 columns
  chain_q_short_rows,      // a sampled chain whose q has a row fewer than its tokens
};

// Drafts the full shape `branching`: each node's children are drawn as `draw` asks from a
// uniform q over V (deterministic: tokens 0, 1, ... in order), so an honest draft is lossless.
class scripted_tree_drafter {
 public:
  explicit scripted_tree_drafter(std::size_t vocab) : v_(vocab) {}

  tree_fault fault = tree_fault::none;
  bool deterministic = false;  // propose deterministic trees (tokens 0, 1, ...)
  std::size_t tree_calls = 0;
  std::vector<std::size_t> last_branching;  // the shape the last propose_tree was asked for

  std::size_t vocab_size() const noexcept { return v_; }
  void reset() noexcept {}
  void accept(std::span<const token_id>) noexcept {}

  // Chains: the first k tokens of 0, 1, ..., deterministic; with a chain fault, k draws from a
  // uniform q of the wrong shape.
  void propose(std::span<const token_id>, std::size_t k, const sampling_params&, rng& gen,
               draft& out) {
    out.clear();
    if (fault == tree_fault::chain_q_short_columns || fault == tree_fault::chain_q_short_rows) {
      const std::vector<float> uniform(v_, 1.0f / static_cast<float>(v_));
      for (std::size_t i = 0; i < k; ++i) out.tokens.push_back(sample(uniform, gen));
      const auto rows = static_cast<Eigen::Index>(k) - (fault == tree_fault::chain_q_short_rows);
      const auto cols = static_cast<Eigen::Index>(v_) - (fault == tree_fault::chain_q_short_columns);
      out.q.setConstant(rows, cols, 1.0f / static_cast<float>(v_));
      return;
    }
    for (std::size_t i = 0; i < k; ++i) out.tokens.push_back(static_cast<token_id>(i % v_));
  }

  void propose_tree(std::span<const token_id> history, std::span<const std::size_t> branching,
                    const sampling_params&, rng& gen, candidate_draw draw, tree_draft& out) {
    ++tree_calls;
    last_branching.assign(branching.begin(), branching.end());
    std::vector<std::size_t> shape(branching.begin(), branching.end());
    if (fault == tree_fault::too_deep) shape.push_back(1);
    if (fault == tree_fault::too_wide && !shape.empty()) ++shape[0];
    const bool det = deterministic || fault == tree_fault::deterministic_with_rows;
    out.draw = det ? candidate_draw::deterministic : draw;
    if (fault == tree_fault::duplicate_siblings) out.draw = candidate_draw::without_replacement;
    if (fault == tree_fault::bad_draw) out.draw = static_cast<candidate_draw>(7);
    token_tree tree = token_tree::from_branching(std::span<const std::size_t>(shape),
                                                 history.back());
    if (fault == tree_fault::wrong_root)
      tree.set_token(0, static_cast<token_id>((history.back() + 1) % static_cast<token_id>(v_)));
    const std::vector<float> uniform(v_, 1.0f / static_cast<float>(v_));
    std::vector<token_id> drawn;
    std::vector<float> scratch;
    for (std::size_t node = 0; node < tree.size(); ++node) {
      const auto kids = tree.children(node);
      if (kids.empty()) continue;
      if (det || out.draw == candidate_draw::without_replacement) {
        drawn.clear();
        for (std::size_t c = 0; c < kids.size(); ++c)
          drawn.push_back(static_cast<token_id>(c % v_));
        if (!det && fault != tree_fault::duplicate_siblings)
          draw_candidates(uniform, kids.size(), candidate_draw::without_replacement, gen, drawn,
                          scratch);
        if (fault == tree_fault::duplicate_siblings && drawn.size() > 1) drawn[1] = drawn[0];
      } else {
        draw_candidates(uniform, kids.size(), candidate_draw::iid, gen, drawn, scratch);
      }
      for (std::size_t c = 0; c < kids.size(); ++c)
        tree.set_token(static_cast<std::size_t>(kids[c]), drawn[c]);
    }
    out.tree = tree;
    auto rows = static_cast<Eigen::Index>(det && fault != tree_fault::deterministic_with_rows
                                              ? 0
                                              : tree.size());
    auto cols = static_cast<Eigen::Index>(v_);
    if (fault == tree_fault::q_short_rows) rows -= 1;
    if (fault == tree_fault::q_short_columns) cols -= 1;
    out.q.setConstant(rows, cols, 1.0f / static_cast<float>(v_));
    if (fault == tree_fault::zero_q_child) out.q(0, tree.token(1)) = 0.0f;
  }

 private:
  std::size_t v_;
};

}  // namespace specdec::test
