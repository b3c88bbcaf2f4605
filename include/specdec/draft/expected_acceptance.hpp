// specdec/draft/expected_acceptance.hpp - the acceptance draft heads are expected to get, read
// from the accuracy they carry: a starting point for the speed policy
// (generate_options::policy.expected) before the decoder has measured anything.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

#include "specdec/draft/eagle_head.hpp"
#include "specdec/draft/medusa_heads.hpp"
#include "specdec/tree/tree_plan.hpp"

namespace specdec {

namespace detail {
// A measured accuracy as a rate: NaN and values below 0 count as 0, values above 1 as 1; and
// a depth's rates scaled down when they sum past 1 (which measured fractions never do).
inline double accuracy_rate(double x) noexcept { return x > 0.0 ? std::min(x, 1.0) : 0.0; }
inline void cap_depth(std::vector<double>& row) noexcept {
  double sum = 0.0;
  for (const double x : row) sum += x;
  if (sum > 1.0)
    for (double& x : row) x /= sum;
}
}  // namespace detail

/// The chain profile an EAGLE-style predictor's depth_accuracy implies: rate[d][0] = the
/// measured top-1 agreement at drafted depth d + 1. Empty when the weights carry none.
inline acceptance_profile expected_acceptance(const eagle_weights& w) {
  acceptance_profile p;
  for (const float a : w.depth_accuracy) p.rate.push_back({detail::accuracy_rate(a)});
  return p;
}

/// The profile Medusa heads' rank_accuracy implies: rate[k][r] = the measured probability that
/// head k's r-th most likely token is the target's. Empty when the weights carry none.
inline acceptance_profile expected_acceptance(const medusa_weights& w) {
  acceptance_profile p;
  for (Eigen::Index k = 0; k < w.rank_accuracy.rows(); ++k) {
    std::vector<double> row;
    for (Eigen::Index r = 0; r < w.rank_accuracy.cols(); ++r)
      row.push_back(detail::accuracy_rate(w.rank_accuracy(k, r)));
    if (row.empty()) break;
    detail::cap_depth(row);
    p.rate.push_back(std::move(row));
  }
  return p;
}

/// The profile a drafter's heads imply: expected_acceptance(d.weights()) for a drafter that
/// hands out EAGLE-style or Medusa weights (eagle_drafter, medusa_drafter); empty for any other
/// drafter, so that an engine can set policy.expected whatever it drafts with.
template <class Drafter>
acceptance_profile expected_acceptance_of(const Drafter& d) {
  if constexpr (requires { expected_acceptance(d.weights()); })
    return expected_acceptance(d.weights());
  else
    return {};
}

}  // namespace specdec
