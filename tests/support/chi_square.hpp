// tests/support/chi_square.hpp - Pearson's chi-square goodness-of-fit for the statistical tests.
#pragma once

#include <cmath>
#include <cstddef>
#include <iterator>
#include <span>
#include <string>
#include <vector>

namespace specdec::test {

/// The outcome of a goodness-of-fit test of observed counts against expected probabilities.
struct chi_square_result {
  double statistic = 0.0;
  double critical = 0.0;  ///< the statistic's upper quantile at the chosen significance
  std::size_t dof = 0;
  bool pass() const { return statistic <= critical; }
  std::string describe() const {
    return "chi2 = " + std::to_string(statistic) + " (critical " + std::to_string(critical) +
           ", dof " + std::to_string(dof) + ")";
  }
};

/// Upper quantile of chi-square with `dof` degrees of freedom for the normal quantile z (3.719 =
/// significance 1e-4: a correct sampler fails one case in 10,000): exact for dof <= 10 at that
/// significance, Wilson-Hilferty otherwise (within 1% there, conservative for small dof).
inline double chi_square_critical(std::size_t dof, double z = 3.719) {
  static constexpr double exact_1e4[] = {0.0,    15.137, 18.421, 21.108, 23.513, 25.745,
                                         27.856, 29.878, 31.828, 33.720, 35.564};
  if (z == 3.719 && dof < std::size(exact_1e4)) return exact_1e4[dof];
  const double k = static_cast<double>(dof);
  const double a = 2.0 / (9.0 * k);
  return k * std::pow(1.0 - a + z * std::sqrt(a), 3.0);
}

/// Tests counts against probabilities. Cells with expected count < 5 are pooled into one.
/// A count in a cell of probability 0 fails outright (statistic = +inf).
inline chi_square_result chi_square(std::span<const std::size_t> counts,
                                    std::span<const double> probs, double z = 3.719) {
  std::size_t n = 0;
  for (auto c : counts) n += c;
  chi_square_result r;
  double pooled_expected = 0.0, pooled_observed = 0.0;
  std::size_t cells = 0;
  for (std::size_t i = 0; i < counts.size(); ++i) {
    const double e = probs[i] * static_cast<double>(n);
    if (probs[i] <= 0.0) {
      if (counts[i] > 0) r.statistic = INFINITY;
      continue;
    }
    if (e < 5.0) {
      pooled_expected += e;
      pooled_observed += static_cast<double>(counts[i]);
      continue;
    }
    const double d = static_cast<double>(counts[i]) - e;
    r.statistic += d * d / e;
    ++cells;
  }
  if (pooled_expected > 0.0) {
    const double d = pooled_observed - pooled_expected;
    r.statistic += d * d / pooled_expected;
    ++cells;
  }
  r.dof = cells > 1 ? cells - 1 : 1;
  r.critical = chi_square_critical(r.dof, z);
  return r;
}

}  // namespace specdec::test
