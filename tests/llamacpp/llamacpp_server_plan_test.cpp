// tests/llamacpp/llamacpp_server_plan_test.cpp - llama-server's step cost and plans
// (examples/llamacpp/server/server_cost.hpp, server_plan.hpp): the batch split the cost models,
// the calibration as its prior, the fit on recorded steps moving the plan to what the server
// really pays, and the plans: one K for every slot of a step, probes while the plan is K = 0.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <random>
#include <vector>

#include "catch_runner.hpp"
#include "server_cost.hpp"
#include "server_plan.hpp"

using specdec::llama_server::split_passes;
using specdec::llama_server::step_cost;
using specdec::llama_server::step_shape;
namespace ls = specdec::llama_server;

namespace {

// A calibration: the target's t(n) = 10 ms + 1 ms a token up to 36 tokens, the draft model's
// d(n) = 1 ms + 0.1 ms a token up to 4.
std::vector<double> target_curve() {
  std::vector<double> t(37, 0.0);
  for (std::size_t n = 1; n < t.size(); ++n) t[n] = 10e-3 + 1e-3 * static_cast<double>(n);
  return t;
}
std::vector<double> draft_curve() {
  std::vector<double> d(5, 0.0);
  for (std::size_t n = 1; n < d.size(); ++n) d[n] = 1e-3 + 0.1e-3 * static_cast<double>(n);
  return d;
}

// K planned for `profile` acceptance at every depth on `cost`.
std::size_t planned_k(const specdec::step_cost_model& cost, double rate) {
  specdec::acceptance_profile profile;
  for (int d = 0; d < 8; ++d) profile.rate.push_back({rate});
  return specdec::plan_chain(profile, cost, 8, 0.02).branching.size();
}

}  // namespace

TEST_CASE("split_passes models llama_decode's split of a batch across slots") {
  std::array<std::size_t, 4> c{3, 6, 2, 4};
  CHECK(split_passes(c, 512, false) == 4);  // split_equal: 2 each, then 1 of three, 1 of two, 2 of one
  CHECK(c == std::array<std::size_t, 4>{0, 0, 0, 0});
  c = {4, 4, 4, 4};
  CHECK(split_passes(c, 512, false) == 1);
  c = {3, 6, 2, 4};
  CHECK(split_passes(c, 512, true) == 1);  // a unified KV cache takes any tokens in one pass
  c = {200, 200, 200, 200};
  CHECK(split_passes(c, 512, false) == 2);  // at most 512 / 4 = 128 a slot a pass
  c = {0, 0, 0, 0};
  CHECK(split_passes(c, 512, false) == 0);
  std::array<std::size_t, 2> u{700, 0};
  CHECK(split_passes(u, 512, true) == 2);
}

TEST_CASE("step_cost starts from the calibration: one K for all, costed as the curves give it") {
  step_cost cost;
  CHECK_FALSE(cost.ready());
  cost.reset(target_curve(), draft_curve());
  REQUIRE(cost.ready());
  const auto t = target_curve();
  const auto d = draft_curve();
  for (std::size_t g : {1, 2, 4}) {
    const auto m = cost.cost_for(g, 8);
    REQUIRE(m.target.size() == 10);
    for (std::size_t n = 1; n <= 9; ++n)
      CHECK(m.target[n] == Approx(t[g * n] / static_cast<double>(g)));
    CHECK(m.draft_per_level == Approx(d[g] / static_cast<double>(g)));
    // A step of g slots drafting k: t(g(k + 1)) + k d(g).
    CHECK(cost.predict(g, 3) == Approx(t[4 * g] + 3 * d[g]));
  }
  // Drafting lengths 3, 1 and 0 make three draft calls: 3 slots, then the two longer, then one.
  const std::array<int, 3> lengths{3, 1, 0};
  CHECK(cost.draft_level_seconds(lengths) == Approx(d[3] + d[1] + d[1]));
}

TEST_CASE("step_cost fitted on recorded steps predicts what they cost and plans shorter drafts "
          "where rows cost more than the calibration saw") {
  // The server's true step: the calibrated decode and drafting, plus 2 ms of CPU work per row
  // read (sampler chain, verification) and 1 ms a generating slot, which calibration never sees.
  const auto t = target_curve();
  const auto d = draft_curve();
  const auto truth = [&](std::size_t g, std::size_t k) {
    return t[g * (k + 1)] + static_cast<double>(k) * d[g] + 2e-3 * static_cast<double>(g * (k + 1)) +
           1e-3 * static_cast<double>(g);
  };
  step_cost cost;
  cost.reset(t, d);
  const std::size_t k_prior = planned_k(cost.cost_for(4, 8), 0.7);

  std::mt19937 rng(11);
  std::uniform_int_distribution<std::size_t> slots(1, 4), draft(0, 8);
  for (int i = 0; i < 600; ++i) {
    const std::size_t g = slots(rng), k = draft(rng);
    step_shape s;
    s.generating = g;
    s.target_tokens = g * (k + 1);
    s.rows = g * (k + 1);
    s.ubatches = 1;
    s.draft_calls = k;
    std::vector<int> lengths(g, static_cast<int>(k));
    s.draft_calibrated = k > 0 ? cost.draft_level_seconds(lengths) : 0.0;
    REQUIRE(cost.record(s, truth(g, k)));
  }
  for (std::size_t g : {1, 2, 4})
    for (std::size_t k : {0, 2, 5, 8}) CHECK(cost.predict(g, k) == Approx(truth(g, k)).epsilon(0.08));

  const std::size_t k_fitted = planned_k(cost.cost_for(4, 8), 0.7);
  CHECK(k_fitted < k_prior);
  // A step with nothing generated is not recorded.
  CHECK_FALSE(cost.record(step_shape{}, 1.0));
}

TEST_CASE("step_cost: a batch split in several passes and a draft catch-up are costed from "
          "steps that hold them") {
  const auto t = target_curve();
  const auto d = draft_curve();
  step_cost cost;
  cost.reset(t, d);
  std::mt19937 rng(5);
  std::uniform_int_distribution<std::size_t> extra(0, 3), caught(0, 40);
  for (int i = 0; i < 600; ++i) {
    step_shape s;
    s.generating = 4;
    s.target_tokens = 12;
    s.rows = 12;
    s.ubatches = 1 + extra(rng);
    s.catch_up = caught(rng);
    // Each extra pass costs 3 t(1); each token caught up 0.2 ms.
    const double seconds = t[12] + 3.0 * t[1] * static_cast<double>(s.ubatches - 1) + 0.2e-3 * static_cast<double>(s.catch_up);
    REQUIRE(cost.record(s, seconds));
  }
  const auto c = cost.coefficients();
  CHECK(c[6] == Approx(3.0).epsilon(0.08));    // an extra pass, in t(1)
  CHECK(c[5] == Approx(0.2e-3).epsilon(0.08));  // a caught-up token
  // Plans keep one pass: the prediction for one K for all has no extra pass in it (what the
  // fitted slopes miss of the extra passes' and catch-up's cost lands in the step's constant).
  CHECK(cost.predict(4, 2) == Approx(t[12]).epsilon(0.15));
  CHECK(cost.predict(4, 2) < t[12] + 0.5 * 3.0 * t[1]);  // well below a step with one extra pass
}

namespace {
// The server's policy, on, with the calibration above, and a fresh chain plan.
void reset_policy(int n_min = 0) {
  ls::server_policy() = ls::speed_policy{};
  ls::server_policy().active = true;
  ls::server_policy().n_min = n_min;
  ls::server_policy().max_k = std::max(8, n_min);
  ls::server_policy().cost.reset(target_curve(), draft_curve());
  ls::server_chain_plan() = ls::chain_plan{};
}
// One step of `g` slots asking in turn: the K each gets.
std::vector<int> step(std::size_t g, int cap = 8) {
  std::vector<int> k;
  for (std::size_t i = 0; i < g; ++i) k.push_back(ls::server_chain_plan().plan(cap, g));
  return k;
}
}  // namespace

TEST_CASE("server plan: off, it gives the cap; on, the cap until depth 0 is measured") {
  ls::server_policy() = ls::speed_policy{};
  ls::server_chain_plan() = ls::chain_plan{};
  CHECK(ls::server_chain_plan().plan(5, 2) == 5);
  reset_policy();
  CHECK(step(3) == std::vector<int>{8, 8, 8});
  CHECK(step(3, 4) == std::vector<int>{4, 4, 4});  // within each slot's room
}

TEST_CASE("server plan: drafts never kept turn drafting off, and probes draft one token in every "
          "slot of a step, backing off") {
  reset_policy();
  const std::size_t g = 4;
  // The cap until depth 0 has been offered 4 times (decayed counts): two steps of 4 slots.
  std::vector<int> k = step(g);
  int measuring = 0;
  for (; k[0] == 8; k = step(g), ++measuring) {
    REQUIRE(k == std::vector<int>(g, 8));
    for (std::size_t s = 0; s < g; ++s) ls::server_chain_plan().record(8, 0);
  }
  CHECK(measuring == 2);
  // K = 0 from the step just planned (step 1); probes at steps 8, 8 + 16 and 8 + 16 + 32.
  std::vector<int> probe_steps;
  for (int n = 1; n <= 8 + 16 + 32; ++n, k = step(g)) {
    REQUIRE(std::all_of(k.begin(), k.end(), [&](int x) { return x == k[0]; }));  // one K for all
    if (k[0] > 0) {
      CHECK(k[0] == 1);
      probe_steps.push_back(n);
      for (std::size_t s = 0; s < g; ++s) ls::server_chain_plan().record(1, 0);
    }
  }
  CHECK(probe_steps == std::vector<int>{8, 8 + 16, 8 + 16 + 32});
  CHECK(ls::server_chain_plan().planned() == 0);
}

TEST_CASE("server plan: drafts always kept plan a long chain, one K for every slot") {
  reset_policy();
  for (int i = 0; i < 20; ++i) {
    const std::vector<int> k = step(2);
    REQUIRE(k[0] == k[1]);
    for (int s = 0; s < 2; ++s) ls::server_chain_plan().record(static_cast<std::size_t>(k[0]), static_cast<std::size_t>(k[0]));
  }
  CHECK(step(2) == std::vector<int>{8, 8});
  const auto shown = ls::predicted_step_seconds();
  REQUIRE(shown.size() == 9);
  CHECK(shown[8] > shown[0]);
}

TEST_CASE("server plan: with n_min, no K between 0 and n_min; probes draft n_min") {
  reset_policy(3);
  std::vector<int> k = step(2);
  for (int i = 0; k[0] == 8; k = step(2), ++i) {
    REQUIRE(i < 10);
    for (int s = 0; s < 2; ++s) ls::server_chain_plan().record(8, 0);
  }
  int probes = 0;
  for (int n = 1; n <= 8; ++n, k = step(2)) {
    if (k[0] > 0) {
      CHECK(k == std::vector<int>{3, 3});
      ++probes;
    }
  }
  CHECK(probes == 1);
  CHECK(step(2, 2) == std::vector<int>{0, 0});  // room for 2 only: below n_min, no draft
}

int main(int argc, char* argv[]) { return specdec_test::run_catch(argc, argv); }
