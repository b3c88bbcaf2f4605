#include <catch2/catch.hpp>
#include <specdec/math/warp.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

namespace {

// The reference: the same pipeline with a full sort, as the definition reads.
std::vector<float> reference_warp(const std::vector<float>& logits, const specdec::sampling_params& sp) {
  const std::size_t v = logits.size();
  const float m = *std::max_element(logits.begin(), logits.end());
  std::vector<float> p(v);
  for (std::size_t i = 0; i < v; ++i) p[i] = std::exp((logits[i] - m) / sp.temperature);
  std::vector<std::size_t> order(v);
  std::iota(order.begin(), order.end(), 0);
  auto by_prob = [&](std::size_t a, std::size_t b) { return p[a] > p[b] || (p[a] == p[b] && a < b); };
  if (sp.top_k > 0 && sp.top_k < v) {
    std::sort(order.begin(), order.end(), by_prob);
    for (std::size_t r = sp.top_k; r < v; ++r) p[order[r]] = 0.0f;
  }
  if (sp.top_p < 1.0f) {
    std::sort(order.begin(), order.end(), by_prob);
    double total = 0.0;
    for (float x : p) total += x;
    double cum = 0.0;
    float boundary = 0.0f;
    for (std::size_t r = 0; r < v; ++r) {
      cum += p[order[r]];
      if (cum >= sp.top_p * total) {
        boundary = p[order[r]];
        break;
      }
    }
    for (float& x : p)
      if (x < boundary) x = 0.0f;
  }
  if (sp.min_p > 0.0f) {
    const float mx = *std::max_element(p.begin(), p.end());
    for (float& x : p)
      if (x < sp.min_p * mx) x = 0.0f;
  }
  double s = 0.0;
  for (float x : p) s += x;
  for (float& x : p) x = static_cast<float>(x / s);
  return p;
}

}  // namespace

TEST_CASE("warp: matches the sort-based definition on random rows") {
  specdec::rng g(11);
  specdec::warp_workspace ws;
  for (int trial = 0; trial < 400; ++trial) {
    const std::size_t v = 1 + g() % 300;
    std::vector<float> logits(v);
    for (auto& x : logits) x = static_cast<float>(g.uniform_open() * 8.0 - 4.0);
    if (trial % 3 == 0)  // many exact ties
      for (auto& x : logits) x = std::round(x);
    specdec::sampling_params sp;
    sp.temperature = static_cast<float>(0.3 + g.uniform_open() * 1.5);
    sp.top_k = (trial % 2) ? g() % (v + 3) : 0;
    sp.top_p = (trial % 4 < 2) ? static_cast<float>(0.05 + 0.95 * g.uniform_open()) : 1.0f;
    sp.min_p = (trial % 5 == 0) ? static_cast<float>(0.2 * g.uniform_open()) : 0.0f;
    std::vector<float> got(v);
    specdec::warp(logits, sp, got, ws);
    const auto want = reference_warp(logits, sp);
    INFO("trial " << trial << " V " << v << " top_k " << sp.top_k << " top_p " << sp.top_p);
    for (std::size_t i = 0; i < v; ++i) {
      REQUIRE((got[i] == 0.0f) == (want[i] == 0.0f));
      REQUIRE(got[i] == Approx(want[i]).epsilon(1e-4));
    }
  }
}

TEST_CASE("warp: temperature 0 is one-hot at the lowest-id argmax") {
  std::vector<float> logits{0.f, 5.f, 5.f, 1.f}, p(4);
  specdec::sampling_params sp;
  sp.temperature = 0.0f;
  specdec::warp(logits, sp, p);
  CHECK(p == std::vector<float>{0.f, 1.f, 0.f, 0.f});
}

TEST_CASE("warp: masked (-inf) tokens get probability 0, NaN and +inf throw") {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> logits{-inf, 0.f, 0.f}, p(3);
  specdec::warp(logits, {}, p);
  CHECK(p[0] == 0.0f);
  CHECK(p[1] == Approx(0.5f));
  std::vector<float> bad{0.f, 1.f, std::nanf("")};
  REQUIRE_THROWS_WITH(specdec::warp(bad, {}, p), "logits: NaN at token 2");
  std::vector<float> pinf{inf, 1.f, 0.f};
  REQUIRE_THROWS_WITH(specdec::warp(pinf, {}, p), "logits: +inf at token 0");
}

TEST_CASE("warp: sampling_params are validated with the field named") {
  specdec::sampling_params sp;
  sp.top_p = 0.0f;
  REQUIRE_THROWS_WITH(sp.validate(), Catch::StartsWith("sampling_params.top_p: must be in (0, 1]"));
  sp = {};
  sp.temperature = -1.0f;
  REQUIRE_THROWS_WITH(sp.validate(), Catch::StartsWith("sampling_params.temperature"));
  sp = {};
  sp.min_p = 1.0f;
  REQUIRE_THROWS_WITH(sp.validate(), Catch::StartsWith("sampling_params.min_p"));
}
