// specdec/detail/draft_heads.hpp - what the draft-head drafters share: the view of a weight
// matrix, SiLU, the source of hidden rows they read and the row they start from.
#pragma once

#include <algorithm>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <span>
#include <stdexcept>
#include <string>

#include <Eigen/Core>

#include "specdec/types.hpp"

namespace specdec {

/// A read-only row-major matrix (rows = outputs): a weight the engine owns, e.g. its classifier.
using weight_view = Eigen::Map<const row_matrix>;

/// How a heads drafter proposes candidates when the target samples (greedy decoding always uses
/// the top candidates). Both are verified losslessly.
enum class head_candidates {
  /// The heads' most likely tokens, each verified as its own one-hot proposal (deterministic).
  top,
  /// Tokens drawn from the heads' own (warped) distributions, verified with those q rows.
  sampled,
};

namespace detail {

/// What a heads drafter reads: the committed tokens of the target's context and their hidden
/// rows (specdec::hidden_capture models it).
template <class S>
concept hidden_row_source = requires(const S& s, std::size_t position) {
  { s.size() } -> std::convertible_to<std::size_t>;
  { s.hidden_size() } -> std::convertible_to<std::size_t>;
  { s.vocab_size() } -> std::convertible_to<std::size_t>;
  { s.hidden(position) } -> std::convertible_to<std::span<const float>>;
  { s.tokens() } -> std::convertible_to<std::span<const token_id>>;
};

/// m gets at least `rows` rows of `cols` columns, keeping its storage when it has them already
/// (contents unspecified when it grows): a heads drafter's buffers allocate once, for the
/// largest step, and a step uses their top rows.
inline void fit_rows(row_matrix& m, Eigen::Index rows, Eigen::Index cols) {
  if (m.cols() != cols || m.rows() < rows) m.resize(std::max(rows, m.rows()), cols);
}

/// SiLU(x) = x / (1 + e^-x), elementwise, in place.
template <class Derived>
void silu_in_place(Eigen::MatrixBase<Derived>& m) {
  m.derived().array() = m.derived().array() / (1.0f + (-m.derived().array()).exp());
}

/// The hidden row the heads start from: the target's row at the last committed position, when
/// the target holds exactly the history minus its last token (the decoder's invariant). Empty
/// when it does not, or the source has no row there (nothing to draft from: the drafter proposes
/// nothing). Throws std::invalid_argument naming `who` when the row is not hidden_size() wide or
/// holds NaN or infinity.
template <class S>
std::span<const float> start_row(const S& source, std::span<const token_id> history,
                                 const char* who) {
  const std::size_t h = history.size();
  if (h < 2 || static_cast<std::size_t>(source.size()) + 1 != h) return {};
  const std::span<const token_id> held = source.tokens();
  if (held.size() + 1 != h || held.back() != history[h - 2]) return {};
  const std::span<const float> row = source.hidden(h - 2);
  if (row.empty()) return {};
  const auto d = static_cast<std::size_t>(source.hidden_size());
  if (row.size() != d)
    throw std::invalid_argument(std::string(who) + ": the target's hidden row at position " +
                                std::to_string(h - 2) + " has " + std::to_string(row.size()) +
                                " entries, not hidden_size() = " + std::to_string(d));
  for (float x : row)
    if (!std::isfinite(x))
      throw std::invalid_argument(std::string(who) + ": the target's hidden row at position " +
                                  std::to_string(h - 2) + " is not finite (NaN or inf)");
  return row;
}

}  // namespace detail

}  // namespace specdec
