// specdec/decode/pipeline.hpp - one sequence's step pipeline: draft -> score -> verify -> commit,
// the public phases of decode/ in order around one sequence_state. The single-sequence decoder runs all
// four on its target; the batch decoder runs the draft phase of every sequence, one batched
// score for all, then verify and commit per sequence.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "specdec/concepts/drafter.hpp"
#include "specdec/concepts/language_model.hpp"
#include "specdec/concepts/tree_drafter.hpp"
#include "specdec/decode/commit_phase.hpp"
#include "specdec/decode/draft_phase.hpp"
#include "specdec/decode/options.hpp"
#include "specdec/decode/score_phase.hpp"
#include "specdec/decode/sequence_state.hpp"
#include "specdec/decode/start.hpp"
#include "specdec/decode/verify_phase.hpp"
#include "specdec/types.hpp"

namespace specdec {

namespace detail {

// A callable that accepts any part: only used to ask whether a drafter has for_each_part.
struct any_part {
  template <class Part>
  void operator()(Part&) const noexcept {}
};

/**
 * Calls f(d, name) for `drafter` (named `name`) and, when it exposes its parts through the
 * optional Drafter member for_each_part(f) (composed_drafter does), for every part at any depth,
 * named name.part[i]. O(number of parts).
 */
template <class Draft, class F>
void walk_drafter(Draft& drafter, const std::string& name, F& f) {
  f(drafter, name);
  if constexpr (requires { drafter.for_each_part(any_part{}); }) {
    std::size_t i = 0;
    drafter.for_each_part([&](auto& part) {
      walk_drafter(part, name + ".part[" + std::to_string(i++) + "]", f);
    });
  }
}

/// Which context a model stands for: context_key(m) when the type has one (found by
/// argument-dependent lookup: a view such as sequence_view names the sequence it views), else
/// the object itself. Two models with equal keys share one context.
using context_key_t = std::pair<const void*, std::uint64_t>;
template <class M>
context_key_t context_of(const M& m) {
  if constexpr (requires {
                  { context_key(m) } -> std::convertible_to<context_key_t>;
                }) {
    return context_key(m);
  } else {
    return {static_cast<const void*>(std::addressof(m)), 0};
  }
}

/// A drafter (or part) that says which model it drafts with: d.model(), an lvalue.
template <class D>
concept exposes_draft_model = requires(D& d) {
  { &d.model() } -> std::convertible_to<const void*>;
};

/**
 * Throws std::invalid_argument, naming the drafter or the part at fault ("drafter",
 * "drafter.part[1]", ...), if `drafter` cannot draft for `model`: it or any of its parts has a
 * vocab_size() other than the target's, drafts with the target's context itself (they would
 * overwrite each other's; compared by context_of), or shares its draft model's context with
 * another part (not with a part of its own: a wrapper may forward its part's model()). Touches
 * no model. O(parts^2).
 */
template <class Model, class Draft>
void check_drafter_for(const Model& model, Draft& drafter) {
  const auto v = static_cast<std::size_t>(model.vocab_size());
  const context_key_t target = context_of(model);
  std::vector<std::pair<context_key_t, std::string>> models;  // draft contexts seen, by whom
  auto check = [&](auto& d, const std::string& name) {
    if constexpr (requires { d.vocab_size(); }) {
      const std::size_t dv = static_cast<std::size_t>(d.vocab_size());
      if (dv != v)
        throw std::invalid_argument(name + ": draft vocab_size " + std::to_string(dv) +
                                    " differs from the target's vocab_size " + std::to_string(v));
    }
    if constexpr (exposes_draft_model<std::remove_reference_t<decltype(d)>>) {
      const context_key_t m = context_of(d.model());
      if (m == target)
        throw std::invalid_argument(
            name +
            ": the draft model is the target itself; both need their own context (use a "
            "second instance, or a view with its own cache such as a layer-skip draft)");
      for (const auto& [seen, by] : models)  // a wrapper forwarding its part's model() is fine
        if (seen == m && name.compare(0, by.size() + 1, by + ".") != 0)
          throw std::invalid_argument(name + ": its draft model is also " + by +
                                      "'s; each draft model needs a context of its own");
      models.emplace_back(m, name);
    }
  };
  walk_drafter(drafter, "drafter", check);
}

}  // namespace detail

/**
 * The pipeline of one sequence whose context lives in `Model` (a LanguageModel: the target, or
 * one sequence of a batch model). `model_scores_trees`: whoever scores this sequence's rows can
 * score a tree (the single-sequence decoder always can, through the path-by-path fallback; the
 * batch decoder when its model is a BatchTreeLanguageModel). Holds references: the model and
 * drafter must outlive it. Not thread-safe.
 */
template <class Model, class Draft>
class sequence_pipeline {
 public:
  sequence_pipeline(Model& model, Draft& drafter, bool model_scores_trees = true)
      : model_(model), drafter_(drafter), model_scores_trees_(model_scores_trees) {}

  /// Whether a step of this pipeline can be a tree: a TreeDrafter, and a model that scores
  /// trees. What validation and re-planning read (trees_possible).
  bool can_tree() const noexcept { return TreeDrafter<Draft> && model_scores_trees_; }

  /// decode/start.hpp: validate, reset, feed the prompt.
  void start(std::span<const token_id> prompt, const generate_options& options) {
    start_sequence(state_, model_, drafter_, prompt, options, can_tree());
  }
  /// Phase 1 (decode/draft_phase.hpp), with at most max_k draft positions and max_rows rows.
  void draft(std::size_t max_k = static_cast<std::size_t>(-1),
             std::size_t max_rows = static_cast<std::size_t>(-1)) {
    draft_phase(state_, drafter_, max_k, max_rows);
  }
  /// Phase 2 on the model alone (decode/score_phase.hpp).
  void score() { score_phase(state_, model_); }
  /// Phases 3 and 4 (decode/verify_phase.hpp, decode/commit_phase.hpp), once the rows are
  /// written. On a verification error the model is rolled back to the start of the step.
  step_result finish() {
    try {
      verify_phase(state_);
    } catch (...) {
      abandon_step(state_, model_);
      throw;
    }
    return commit_phase(state_, model_, drafter_);
  }
  /// All four phases.
  step_result step() {
    draft();
    score();
    return finish();
  }

  sequence_state& state() noexcept { return state_; }
  const sequence_state& state() const noexcept { return state_; }
  Model& model() noexcept { return model_; }
  Draft& drafter() noexcept { return drafter_; }

 private:
  Model& model_;
  Draft& drafter_;
  bool model_scores_trees_;
  sequence_state state_;
};

}  // namespace specdec
