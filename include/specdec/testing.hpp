// specdec/testing.hpp - the adapter conformance kit: checks an engine author runs against their
// own LanguageModel / TreeLanguageModel adapter before trusting specdec's guarantees to it.
//
// Every check takes a *source*: either a model (each check first resets it with truncate(0)) or
// a factory, a callable returning a fresh model by value (each check builds its own, so a broken
// truncate cannot hide behind another check's state; run_all says what a factory must return).
// Checks never throw for a failing model: they return a check_result whose message says which
// check, position, token and logit differ, and the largest absolute difference seen. Free of any
// test framework.
//
// The parts: testing/result.hpp (options, results), testing/model_checks.hpp (checks a-e, and i
// for a model with prefill),
// testing/tree_checks.hpp (checks f1-f3), testing/batch_checks.hpp (checks g1-g5 for a
// BatchLanguageModel, run_batch_checks), testing/hidden_checks.hpp (check h, for a
// HiddenStateModel), detail/conformance.hpp (sources, comparison).
#pragma once

#include <type_traits>
#include <utility>

#include "specdec/concepts/tree_language_model.hpp"
#include "specdec/detail/conformance.hpp"
#include "specdec/testing/batch_checks.hpp"
#include "specdec/concepts/hidden_state_model.hpp"
#include "specdec/testing/hidden_checks.hpp"
#include "specdec/testing/model_checks.hpp"
#include "specdec/testing/result.hpp"
#include "specdec/testing/tree_checks.hpp"

namespace specdec::testing {

/// Runs every check (the tree checks when the model is a TreeLanguageModel, the hidden-row check
/// for a HiddenStateModel, the prefill check for a PrefillLanguageModel) and collects them.
///
/// `source` is a model, which each check resets with truncate(0): the form for an adapter that
/// refers to a session it does not own. Or it is a factory, called at least once per check,
/// which must return
/// - a model by value, not a reference (a static_assert says so otherwise);
/// - with an empty context of its own, size() 0, not shared with an earlier call's model (a
///   model that starts non-empty fails the check that made it);
/// - that owns its context or refers only to objects that outlive run_all, such as weights or a
///   target created outside the factory. This cannot be checked: a model referring to a local of
///   the factory, [&] { session s; return my_model{s}; }, reads a destroyed object.
template <class Source>
conformance_report run_all(Source& source, const conformance_options& o = {}) {
  static_assert(detail::check_model_source<Source>());
  conformance_report rep;
  if constexpr (detail::model_source<Source>) {
    using model_type = typename detail::model_of<Source>::type;
    rep.checks.push_back(check_size_reporting(source, o));
    rep.checks.push_back(check_batched_append(source, o));
    rep.checks.push_back(check_truncate_then_append(source, o));
    rep.checks.push_back(check_truncate_every_length(source, o));
    rep.checks.push_back(check_rejects_bad_input(source, o));
    if constexpr (TreeLanguageModel<model_type>) {
      rep.checks.push_back(check_tree_append(source, o));
      rep.checks.push_back(check_tree_commit(source, o));
      rep.checks.push_back(check_tree_rejects_bad_input(source, o));
    }
    if constexpr (HiddenStateModel<model_type>) rep.checks.push_back(check_hidden_rows(source, o));
    if constexpr (PrefillLanguageModel<model_type>) rep.checks.push_back(check_prefill(source, o));
  }
  for (const check_result& c : rep.checks) {
    rep.ok = rep.ok && c.ok;
    rep.message += (c.ok ? "ok   " : "FAIL ") + c.message + "\n";
  }
  return rep;
}

/// run_all for a temporary factory (e.g. a lambda written in the call); the same rules apply.
/// A temporary model is refused: pass a model variable, or a factory returning the model.
template <class Factory>
requires(!std::is_lvalue_reference_v<Factory>) conformance_report
    run_all(Factory&& factory, const conformance_options& o = {}) {
  static_assert(!LanguageModel<Factory>,
                "specdec::testing::run_all: the model is a temporary; pass a model variable, "
                "run_all(model, options), or a factory, run_all([&] { return my_model(...); })");
  auto f = std::forward<Factory>(factory);
  return run_all(f, o);
}

}  // namespace specdec::testing
