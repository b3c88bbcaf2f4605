// specdec/testing.hpp - the adapter conformance kit: checks an engine author runs against their
// own LanguageModel / TreeLanguageModel adapter before trusting specdec's guarantees to it.
//
// Every check takes a *source*: either a model (each check first resets it with truncate(0)) or
// a factory, a callable returning a fresh model by value (each check builds its own, so a broken
// truncate cannot hide behind another check's state). Checks never throw for a failing model:
// they return a check_result whose message says which check, position, token and logit differ,
// and the largest absolute difference seen. Free of any test framework.
//
// The parts: testing/result.hpp (options, results), testing/model_checks.hpp (checks a-e, and i
// for a model with prefill),
// testing/tree_checks.hpp (checks f1-f3), testing/batch_checks.hpp (checks g1-g5 for a
// BatchLanguageModel, run_batch_checks), testing/hidden_checks.hpp (check h, for a
// HiddenStateModel), detail/conformance.hpp (sources, comparison).
#pragma once

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
template <class Source>
requires detail::model_source<Source> conformance_report
run_all(Source& source, const conformance_options& o = {}) {
  conformance_report rep;
  rep.checks.push_back(check_size_reporting(source, o));
  rep.checks.push_back(check_batched_append(source, o));
  rep.checks.push_back(check_truncate_then_append(source, o));
  rep.checks.push_back(check_truncate_every_length(source, o));
  rep.checks.push_back(check_rejects_bad_input(source, o));
  if constexpr (TreeLanguageModel<typename detail::model_of<Source>::type>) {
    rep.checks.push_back(check_tree_append(source, o));
    rep.checks.push_back(check_tree_commit(source, o));
    rep.checks.push_back(check_tree_rejects_bad_input(source, o));
  }
  if constexpr (HiddenStateModel<typename detail::model_of<Source>::type>)
    rep.checks.push_back(check_hidden_rows(source, o));
  if constexpr (PrefillLanguageModel<typename detail::model_of<Source>::type>)
    rep.checks.push_back(check_prefill(source, o));
  for (const check_result& c : rep.checks) {
    rep.ok = rep.ok && c.ok;
    rep.message += (c.ok ? "ok   " : "FAIL ") + c.message + "\n";
  }
  return rep;
}

/// run_all for a temporary factory (e.g. a lambda written in the call).
template <class Factory>
requires detail::model_factory<Factory> &&(!LanguageModel<Factory>)conformance_report
    run_all(Factory&& factory, const conformance_options& o = {}) {
  auto f = std::forward<Factory>(factory);
  return run_all(f, o);
}

}  // namespace specdec::testing
