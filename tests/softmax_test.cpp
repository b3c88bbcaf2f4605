#include <catch2/catch.hpp>
#include <specdec/math/softmax.hpp>

#include <cmath>
#include <limits>
#include <vector>

TEST_CASE("softmax: matches the definition, is stable for large logits") {
  std::vector<float> l{1000.f, 1001.f, 999.f, -std::numeric_limits<float>::infinity()};
  std::vector<float> p(4), lp(4);
  specdec::softmax(l, p);
  const double z = std::exp(-1.0) + 1.0 + std::exp(-2.0);
  CHECK(p[0] == Approx(std::exp(-1.0) / z));
  CHECK(p[1] == Approx(1.0 / z));
  CHECK(p[3] == 0.0f);
  specdec::log_softmax(l, lp);
  CHECK(lp[1] == Approx(-std::log(z)));
  CHECK(specdec::log_sum_exp(l) == Approx(1001.0 + std::log(z)));
  specdec::softmax(l, p, 0.5f);
  CHECK(p[1] == Approx(1.0 / (1.0 + std::exp(-2.0) + std::exp(-4.0))));
}

TEST_CASE("softmax: NaN, +inf and all -inf rows are refused with the position") {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> out(3);
  std::vector<float> nan_row{0.f, std::nanf(""), 1.f};
  REQUIRE_THROWS_WITH(specdec::softmax(nan_row, out), "logits: NaN at token 1");
  std::vector<float> inf_row{0.f, 1.f, inf};
  REQUIRE_THROWS_WITH(specdec::softmax(inf_row, out), "logits: +inf at token 2");
  std::vector<float> masked{-inf, -inf, -inf};
  REQUIRE_THROWS_WITH(specdec::log_sum_exp(masked), "logits: every token is -inf");
  std::vector<float> small(2);
  REQUIRE_THROWS_AS(specdec::softmax(nan_row, small), std::invalid_argument);
}
