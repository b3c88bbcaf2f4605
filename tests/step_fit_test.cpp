// tests/step_fit_test.cpp - specdec/cost/step_fit.hpp: a step's cost fitted online from a prior.
#include <catch2/catch.hpp>

#include <array>
#include <cmath>
#include <limits>
#include <random>
#include <stdexcept>

#include <specdec/cost/step_fit.hpp>

using specdec::step_fit;
using specdec::step_fit_options;
using features = std::array<double, 3>;

namespace {
// A step's true seconds: 2 ms + 0.5 ms a token + 0.1 ms a row.
double truth(const features& x) { return 2e-3 * x[0] + 0.5e-3 * x[1] + 0.1e-3 * x[2]; }
}  // namespace

TEST_CASE("step_fit starts at the prior and predicts with it before any record") {
  const step_fit<3> fit({1e-3, 1e-3, 0.0}, {1.0, 8.0, 8.0});
  CHECK(fit.steps() == 0.0);
  const auto c = fit.coefficients();
  CHECK(c[0] == Approx(1e-3));
  CHECK(c[1] == Approx(1e-3));
  CHECK(c[2] == Approx(0.0).margin(1e-15));
  CHECK(fit.predict({1.0, 4.0, 4.0}) == Approx(5e-3));
}

TEST_CASE("step_fit finds the true coefficients from steps that vary every feature") {
  step_fit<3> fit({1e-3, 1e-3, 0.0}, {1.0, 8.0, 8.0});
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> tokens(1, 20), rows(1, 20);
  for (int i = 0; i < 2000; ++i) {
    const features x{1.0, static_cast<double>(tokens(rng)), static_cast<double>(rows(rng))};
    REQUIRE(fit.record(x, truth(x)));
  }
  const auto c = fit.coefficients();
  // The prior (one step's weight against about two hundred) biases them by a few percent.
  CHECK(c[0] == Approx(2e-3).epsilon(0.05));
  CHECK(c[1] == Approx(0.5e-3).epsilon(0.05));
  CHECK(c[2] == Approx(0.1e-3).epsilon(0.1));
  CHECK(fit.steps() == Approx(200.0).epsilon(0.01));  // 1 / (1 - 0.995), forgotten
}

TEST_CASE("step_fit follows a cost that changes: the old steps are forgotten") {
  step_fit<3> fit({1e-3, 1e-3, 0.0}, {1.0, 8.0, 8.0});
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> n(1, 20);
  for (int i = 0; i < 1000; ++i) {
    const features x{1.0, static_cast<double>(n(rng)), static_cast<double>(n(rng))};
    fit.record(x, truth(x));
  }
  // The machine becomes twice as slow.
  for (int i = 0; i < 1000; ++i) {
    const features x{1.0, static_cast<double>(n(rng)), static_cast<double>(n(rng))};
    fit.record(x, 2.0 * truth(x));
  }
  const features probe{1.0, 9.0, 9.0};
  CHECK(fit.predict(probe) == Approx(2.0 * truth(probe)).epsilon(0.02));
}

TEST_CASE("step_fit keeps a feature the steps do not vary near its prior instead of drifting") {
  // Every step holds 5 tokens and 5 rows: the data fix only 5 (token + row) coefficients' sum;
  // the split between them stays where the prior puts it, and predictions along the steps seen
  // are right.
  step_fit<3> fit({2e-3, 0.5e-3, 0.1e-3}, {1.0, 8.0, 8.0});
  const features seen{1.0, 5.0, 5.0};
  for (int i = 0; i < 5000; ++i) fit.record(seen, 1.2 * truth(seen));
  CHECK(fit.predict(seen) == Approx(1.2 * truth(seen)).epsilon(0.01));
  const auto c = fit.coefficients();
  for (const double v : c) CHECK(std::isfinite(v));
  // Off the steps seen (one token, 20 rows) the prediction stays within the prior's scale.
  const features unseen{1.0, 1.0, 20.0};
  CHECK(fit.predict(unseen) > 0.5 * truth(unseen));
  CHECK(fit.predict(unseen) < 2.0 * truth(unseen));
}

TEST_CASE("step_fit refuses bad arguments, naming them, and skips bad records") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  CHECK_THROWS_WITH((step_fit<3>({nan, 0, 0}, {1, 1, 1})), Catch::Contains("prior[0]"));
  CHECK_THROWS_WITH((step_fit<3>({0, 0, 0}, {1, 0, 1})), Catch::Contains("scale[1]"));
  CHECK_THROWS_WITH((step_fit<3>({0, 0, 0}, {1, 1, 1}, step_fit_options{0.0, 8.0})),
                    Catch::Contains("options.forgetting"));
  CHECK_THROWS_WITH((step_fit<3>({0, 0, 0}, {1, 1, 1}, step_fit_options{0.99, -1.0})),
                    Catch::Contains("options.prior_weight"));
  step_fit<3> fit({1e-3, 1e-3, 0.0}, {1.0, 8.0, 8.0});
  CHECK_FALSE(fit.record({1.0, 2.0, 2.0}, nan));
  CHECK_FALSE(fit.record({1.0, -2.0, 2.0}, 1e-3));
  CHECK_FALSE(fit.record({1.0, std::numeric_limits<double>::infinity(), 2.0}, 1e-3));
  CHECK(fit.steps() == 0.0);
}
