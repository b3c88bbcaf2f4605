// specdec/decode/adapter_checks.hpp - what the decoder checks of an adapter at run time, for free:
// its size() after each truncate and append the decoder makes. A model whose truncate() keeps
// tokens, or whose append() does not add one row per token, would otherwise give wrong output
// silently; these checks turn that into a std::logic_error naming the member and what it
// reported. (The conformance kit, testing.hpp, checks much more, once, before deployment.)
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>

#include "specdec/concepts/language_model.hpp"

namespace specdec::detail {

/// Throws std::logic_error unless `model.size() == expected`; `who` names the caller, `role`
/// the model ("target", "draft model"), `after` what the decoder had just asked of it.
template <LanguageModel Model>
void check_model_size(const Model& model, std::size_t expected, const char* who, const char* role,
                      const std::string& after) {
  const auto held = static_cast<std::size_t>(model.size());
  if (held == expected) return;
  throw std::logic_error(std::string(who) + ": the " + role + "'s size() is " + std::to_string(held) +
                         " after " + after + ", not " + std::to_string(expected) +
                         ": its adapter does not keep the LanguageModel contract (run "
                         "specdec::testing::run_all on it)");
}

/// model.truncate(n), then checks that size() is n.
template <LanguageModel Model>
void truncate_checked(Model& model, std::size_t n, const char* who, const char* role) {
  model.truncate(n);
  check_model_size(model, n, who, role, "truncate(" + std::to_string(n) + ")");
}

}  // namespace specdec::detail
