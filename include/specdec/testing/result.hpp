// specdec/testing/result.hpp - what the conformance kit is given (conformance_options) and what it
// reports.
#pragma once

#include <algorithm>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <functional>
#include <limits>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "specdec/concepts/language_model.hpp"
#include "specdec/concepts/tree_language_model.hpp"
#include "specdec/types.hpp"

namespace specdec::testing {

/// What the checks feed the model and how close two evaluations must be.
struct conformance_options {
  /// The token sequence used as context. Empty: 16 tokens (7 * i + 1) % vocab_size, fewer if
  /// max_size() is small. Needs at least 2 tokens.
  std::vector<token_id> tokens;
  /// Largest accepted |difference| between logits that must agree (e.g. batched vs
  /// token-by-token append: floating-point summation order differs, so allow for it). >= 0.
  float tolerance = 1e-4f;
  /// The tree for the tree checks (parents[i] = -1 or an earlier index). Empty: a 7-node tree
  /// with two roots whose tokens come from the sequence.
  std::vector<token_id> tree_tokens;
  std::vector<std::int32_t> tree_parents;
  /// Fill the context to max_size() and check the boundary is enforced exactly, when the model
  /// has a max_size() no larger than capacity_probe_limit.
  bool check_capacity = true;
  std::size_t capacity_probe_limit = 4096;
};

/// The outcome of one check. `message` starts with the check's name, then says what differs and
/// where (position, token, logit, values, largest |diff|) on failure, or the largest difference
/// seen on success.
struct check_result {
  std::string name;
  bool ok = true;
  std::string message;
  float max_abs_diff = 0.0f;  ///< largest |logit difference| compared (0 if none compared)
};

/// The outcome of run_all: ok when every check is; `message` has one line per check.
struct conformance_report {
  bool ok = true;
  std::string message;
  std::vector<check_result> checks;
};

}  // namespace specdec::testing
