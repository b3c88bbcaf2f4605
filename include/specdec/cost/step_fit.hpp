// specdec/cost/step_fit.hpp - a step's cost fitted while a decoder serves: the seconds each step
// took, regressed on what the step held, starting from a prior (a calibration) and following the
// steps measured since.
#pragma once

#include <array>
#include <cmath>
#include <cstddef>
#include <stdexcept>
#include <string>

#include <Eigen/Dense>

namespace specdec {

/// How a step_fit weighs what it measured; checked by its constructor, which names the field.
struct step_fit_options {
  /// Each recorded step's weight is multiplied by this at every later record (in (0, 1]): 0.995
  /// weighs about the last two hundred steps.
  double forgetting = 0.995;
  /// The prior counts as this many steps whose features are each at their scale (> 0): after
  /// a few hundred steps it still holds the coefficients the steps do not pin down, and biases
  /// the others by a few percent at most.
  double prior_weight = 1.0;
};

/**
 * A step's seconds as a linear function of N features, fitted online: the coefficients minimise
 * the forgotten squared error of the recorded steps plus prior_weight times the squared distance,
 * in scaled units, from the prior's coefficients. So the fit starts at the prior, follows the
 * steps recorded, and where recent steps do not vary a feature (a draft length held for long),
 * that feature's coefficient stays near the prior instead of drifting (no wind-up, unlike
 * recursive least squares with forgetting alone). A feature's scale is its typical magnitude;
 * the fit is the same whatever the scales when the prior is weightless, and they set how strongly
 * the prior holds each coefficient otherwise.
 *
 * record() costs O(N^2), coefficients() and predict() solve an N x N system when a record came
 * since the last solve; nothing allocates.
 */
template <std::size_t N>
class step_fit {
 public:
  using features = std::array<double, N>;

  /// Starts at `prior` (seconds per unit of each feature). Throws std::invalid_argument naming
  /// the argument unless the prior is finite, each scale positive and finite, and the options
  /// in range.
  step_fit(const features& prior, const features& scale, step_fit_options options = {})
      : options_(options) {
    if (!(options.forgetting > 0.0 && options.forgetting <= 1.0))
      throw std::invalid_argument("step_fit: options.forgetting must be in (0, 1]");
    if (!(options.prior_weight > 0.0) || !std::isfinite(options.prior_weight))
      throw std::invalid_argument("step_fit: options.prior_weight must be positive and finite");
    for (std::size_t j = 0; j < N; ++j) {
      if (!std::isfinite(prior[j]))
        throw std::invalid_argument("step_fit: prior[" + std::to_string(j) + "] must be finite");
      if (!(scale[j] > 0.0) || !std::isfinite(scale[j]))
        throw std::invalid_argument("step_fit: scale[" + std::to_string(j) + "] must be positive and finite");
      scale_(static_cast<Eigen::Index>(j)) = scale[j];
      prior_(static_cast<Eigen::Index>(j)) = prior[j] * scale[j];
    }
    gram_.setZero();
    moment_.setZero();
    theta_ = prior_;
  }

  /// One step: its features and the seconds it took. A step with a non-finite or negative
  /// feature or time is not recorded (returns false): a clock that jumped, a count that
  /// overflowed.
  bool record(const features& x, double seconds) {
    if (!std::isfinite(seconds) || seconds < 0.0) return false;
    vector v;
    for (std::size_t j = 0; j < N; ++j) {
      if (!std::isfinite(x[j]) || x[j] < 0.0) return false;
      v(static_cast<Eigen::Index>(j)) = x[j] / scale_(static_cast<Eigen::Index>(j));
    }
    gram_ = options_.forgetting * gram_ + v * v.transpose();
    moment_ = options_.forgetting * moment_ + seconds * v;
    steps_ = options_.forgetting * steps_ + 1.0;
    solved_ = false;
    return true;
  }

  /// The fitted seconds per unit of each feature.
  features coefficients() const {
    solve();
    features c;
    for (std::size_t j = 0; j < N; ++j)
      c[j] = theta_(static_cast<Eigen::Index>(j)) / scale_(static_cast<Eigen::Index>(j));
    return c;
  }

  /// The fitted seconds of a step with features `x`.
  double predict(const features& x) const {
    const features c = coefficients();
    double s = 0.0;
    for (std::size_t j = 0; j < N; ++j) s += c[j] * x[j];
    return s;
  }

  /// The recorded steps' total weight after forgetting (0 before the first record): how many
  /// steps the fit rests on, against the prior's prior_weight.
  double steps() const noexcept { return steps_; }

 private:
  using vector = Eigen::Matrix<double, static_cast<int>(N), 1>;
  using matrix = Eigen::Matrix<double, static_cast<int>(N), static_cast<int>(N)>;

  void solve() const {
    if (solved_) return;
    const double w = options_.prior_weight;
    const matrix a = gram_ + w * matrix::Identity();
    const vector b = moment_ + w * prior_;
    theta_ = a.ldlt().solve(b);
    solved_ = true;
  }

  step_fit_options options_;
  vector scale_;
  vector prior_;  // scaled: prior[j] * scale[j]
  matrix gram_;
  vector moment_;
  double steps_ = 0.0;
  mutable vector theta_;  // scaled coefficients
  mutable bool solved_ = true;
};

}  // namespace specdec
