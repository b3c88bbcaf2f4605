// Planned shapes (tree/tree_plan.hpp): the planner finds the best shape a brute-force search
// finds, plans no drafts where speculation cannot pay; the decoder measures acceptance by depth
// and rank, and re-planning keeps greedy output and the sampled distribution unchanged.
#include <catch2/catch.hpp>
#include <functional>
#include <numeric>
#include <specdec/decoder.hpp>
#include <specdec/draft/model_drafter.hpp>
#include <specdec/tree/tree_plan.hpp>
#include <vector>

#include "support/chi_square.hpp"
#include "support/exact_joint.hpp"
#include "support/table_model.hpp"

namespace {

using specdec::acceptance_profile;
using specdec::step_cost_model;
using specdec::token_id;
using specdec::test::table_model;

step_cost_model curve(std::size_t n_max, const std::function<double(std::size_t)>& t) {
  step_cost_model c;
  c.target.assign(n_max + 1, 0.0);
  for (std::size_t n = 1; n <= n_max; ++n) c.target[n] = t(n);
  return c;
}

// Every full shape within the bounds, scored independently of the planner.
double best_by_enumeration(const acceptance_profile& p, const step_cost_model& c,
                           std::size_t max_nodes, std::size_t max_depth) {
  double best = 1.0 / c.target[1];
  std::vector<std::size_t> shape;
  std::function<void()> walk = [&] {
    if (shape.size() == max_depth || shape.size() == p.rate.size()) return;
    for (std::size_t k = 1; k <= p.rate[shape.size()].size(); ++k) {
      shape.push_back(k);
      std::size_t nodes = 0, width = 1;
      double tokens = 1.0, reach = 1.0;
      for (std::size_t d = 0; d < shape.size(); ++d) {
        width *= shape[d];
        nodes += width;
        double a = 0;
        for (std::size_t r = 0; r < shape[d]; ++r) a += p.rate[d][r];
        reach *= std::min(a, 1.0);
        tokens += reach;
      }
      if (nodes <= max_nodes && nodes + 1 < c.target.size()) {
        best = std::max(best, tokens / (c.target[nodes + 1] +
                                        c.draft_per_level * static_cast<double>(shape.size()) +
                                        c.draft_per_node * static_cast<double>(nodes)));
        walk();
      }
      shape.pop_back();
    }
  };
  walk();
  return best;
}

}  // namespace

TEST_CASE("tree_plan: free verification plans the deepest chain, compute-bound plans none") {
  acceptance_profile chain{{{0.8}, {0.8}, {0.8}, {0.8}, {0.8}, {0.8}}};
  const auto flat = curve(64, [](std::size_t) { return 1.0; });
  const auto plan = specdec::plan_chain(chain, flat, 16);
  CHECK(plan.branching == std::vector<std::size_t>(6, 1));  // every measured depth
  CHECK(plan.tokens_per_step == Approx(1 + 0.8 + 0.64 + 0.512 + 0.4096 + 0.32768 + 0.262144));
  // t(n) = n: K drafts cost K + 1 calls' worth; no K pays at 0.8 acceptance.
  const auto linear = curve(64, [](std::size_t n) { return static_cast<double>(n); });
  CHECK(specdec::plan_chain(chain, linear, 16).branching.empty());
  CHECK(specdec::plan_tree(chain, linear).branching.empty());
  // A draft cost per level stops the chain early.
  auto costly = flat;
  costly.draft_per_level = 0.3;
  const auto short_plan = specdec::plan_chain(chain, costly, 16);
  CHECK(short_plan.branching.size() < 6);
  CHECK(short_plan.branching.size() >= 1);
  // min_gain: the flat curve's best chain is predicted 1 + 0.8 + ... = 3.95 times plain
  // decoding; a margin above that keeps plain decoding, one below it does not.
  CHECK(specdec::plan_chain(chain, flat, 16, 2.9).branching == plan.branching);
  CHECK(specdec::plan_chain(chain, flat, 16, 3.0).branching.empty());
  CHECK(specdec::plan_tree(chain, flat, 64, 8, 8, 3.0).branching.empty());
  CHECK_THROWS_WITH(specdec::plan_chain(chain, flat, 16, -1.0),
                    "plan_chain: min_gain must be >= 0 and finite");
}

TEST_CASE("tree_plan: the planner's choice scores as well as any enumerated shape") {
  const acceptance_profile tree{{{0.5, 0.2, 0.1, 0.05}, {0.6, 0.2, 0.05}, {0.7, 0.1}, {0.7}}};
  for (std::size_t budget : {3u, 8u, 16u, 32u}) {
    for (double slope : {0.0, 0.01, 0.05, 0.2}) {
      const auto c = curve(64, [slope](std::size_t n) { return 1.0 + slope * (n - 1.0); });
      const auto plan = specdec::plan_tree(tree, c, budget, 8);
      INFO("budget " << budget << ", slope " << slope);
      CHECK(plan.nodes <= budget);
      CHECK(plan.tokens_per_second() == Approx(best_by_enumeration(tree, c, budget, 8)));
    }
  }
  // Wide first level when free: 4 candidates at depth 0 reach 0.85.
  const auto free_plan = specdec::plan_tree(tree, curve(64, [](std::size_t) { return 1.0; }), 64);
  REQUIRE(!free_plan.branching.empty());
  CHECK(free_plan.branching[0] == 4);
}

TEST_CASE("tree_plan: shapes that branch are costed by the tree curve when there is one") {
  // Depth 0 accepts 0.5 with one candidate, 0.9 with two; deeper, 0.9 either way.
  const acceptance_profile p{{{0.5, 0.4}, {0.9, 0.05}, {0.9}, {0.9}}};
  auto c = curve(16, [](std::size_t) { return 1.0; });  // every call costs the same
  const auto cheap = specdec::plan_tree(p, c, 16);
  REQUIRE(!cheap.branching.empty());
  CHECK(cheap.branching[0] == 2);  // the second candidate pays when trees cost what chains do
  // Tree calls that cost 2 t(1), chains still 1: the best plan is a chain, costed by target
  // (the best tree, 2x2x1x1, would give 4.2 tokens a step against the chain's 2.7).
  c.tree_target.assign(17, 2.0);
  const auto dear = specdec::plan_tree(p, c, 16);
  CHECK(dear.branching == std::vector<std::size_t>(4, 1));
  CHECK(dear.seconds_per_step == 1.0);
  CHECK(specdec::predict_plan({2, 1, 1, 1}, p, c).seconds_per_step == 2.0);
  CHECK(specdec::predict_plan({1, 1, 1, 1}, p, c).seconds_per_step == 1.0);
  SECTION("a tree curve of another length, or with a bad entry, is refused by name") {
    c.tree_target.assign(9, 1.5);
    CHECK_THROWS_WITH(specdec::plan_tree(p, c),
                      "plan_tree: cost.tree_target: has 9 entries, expected target's 17");
    c.tree_target.assign(17, 1.5);
    c.tree_target[4] = 0.0;
    CHECK_THROWS_WITH(specdec::plan_tree(p, c),
                      "plan_tree: cost.tree_target[4] must be positive and finite");
  }
}

TEST_CASE("tree_plan: from_stats turns counts into rates and drops rare cells") {
  specdec::decode_stats s;
  s.offered_at_rank = {{100, 50, 10}, {40}, {5}};
  s.accepted_at_rank = {{60, 20, 1}, {30}, {4}};
  const auto p = acceptance_profile::from_stats(s, 16);
  REQUIRE(p.rate.size() == 2);                        // depth 2 has 5 < 16 samples
  CHECK(p.rate[0] == std::vector<double>{0.6, 0.4});  // rank 2 has 10 < 16 samples
  CHECK(p.rate[1] == std::vector<double>{0.75});
  CHECK(p.accepted_within(0, 8) == Approx(1.0));
  CHECK(p.accepted_within(5, 1) == 0.0);
}

TEST_CASE("tree_plan: bad cost curves are refused with the field named") {
  const acceptance_profile p{{{0.5}}};
  CHECK_THROWS_WITH(specdec::plan_tree(p, step_cost_model{}), Catch::Contains("cost.target"));
  auto c = curve(8, [](std::size_t) { return 1.0; });
  c.target[3] = -1;
  CHECK_THROWS_WITH(specdec::plan_chain(p, c), Catch::Contains("cost.target[3]"));
}

TEST_CASE("tree_plan: the decoder counts acceptance by depth and rank, chains and trees") {
  table_model target({.vocab_size = 12, .order = 2, .seed = 5});
  table_model draft_model({.vocab_size = 12, .order = 2, .seed = 5, .mix = 0.4f, .mix_seed = 6});
  specdec::model_drafter<table_model> drafter(draft_model);
  specdec::speculative_decoder decoder(target, drafter);
  const std::vector<token_id> prompt{1, 2, 3};
  specdec::generate_options o;
  o.max_new_tokens = 200;
  o.sampling.temperature = 1.0f;
  o.draft_length = 4;
  const auto sum = [](const std::vector<std::vector<std::size_t>>& m) {
    std::size_t t = 0;
    for (const auto& row : m) t = std::accumulate(row.begin(), row.end(), t);
    return t;
  };
  auto r = decoder.generate(prompt, o);
  CHECK(sum(r.stats.accepted_at_rank) == r.stats.accepted_tokens);
  REQUIRE(!r.stats.offered_at_rank.empty());
  CHECK(r.stats.offered_at_rank[0][0] == r.stats.draft_calls);
  for (std::size_t d = 0; d < r.stats.accepted_at_rank.size(); ++d)
    CHECK(r.stats.accepted_at_rank[d][0] == r.stats.accepted_at[d]);
  o.tree = {3, 2};
  r = decoder.generate(prompt, o);
  CHECK(sum(r.stats.accepted_at_rank) == r.stats.accepted_tokens);
  REQUIRE(r.stats.offered_at_rank.size() == 2);
  CHECK(r.stats.offered_at_rank[0].size() == 3);
  CHECK(r.stats.offered_at_rank[1].size() == 2);
  CHECK(r.stats.offered_at_rank[0][2] == r.stats.offered_at_rank[0][0]);
}

TEST_CASE("tree_plan: re-planning keeps greedy output and the sampled distribution") {
  table_model target({.vocab_size = 16, .order = 3, .seed = 7});
  table_model draft_model({.vocab_size = 16, .order = 3, .seed = 7, .mix = 0.35f, .mix_seed = 9});
  specdec::model_drafter<table_model> drafter(draft_model);
  specdec::speculative_decoder decoder(target, drafter);
  const std::vector<token_id> prompt{3, 1, 4, 1, 5};
  specdec::generate_options o;
  o.max_new_tokens = 120;
  o.sampling.temperature = 0.0f;
  const auto plain = specdec::generate_autoregressive(target, prompt, o);
  o.draft_length = 8;
  o.policy.every = 4;
  o.policy.cost = curve(40, [](std::size_t n) { return 1.0 + 0.02 * static_cast<double>(n); });
  auto r = decoder.generate(prompt, o);
  CHECK(r.tokens == plain.tokens);
  CHECK(!decoder.plan().branching.empty());
  CHECK(r.stats.target_calls < plain.stats.target_calls);
  // Compute-bound: the first plan is plain decoding, and the output is still greedy's.
  o.policy.cost = curve(40, [](std::size_t n) { return static_cast<double>(n); });
  r = decoder.generate(prompt, o);
  CHECK(r.tokens == plain.tokens);
  CHECK(decoder.plan().branching.empty());
  // The plain plan carries over to the next generation until the measurements are dropped.
  o.policy.every = 1000;
  r = decoder.generate(prompt, o);
  CHECK(r.stats.drafted_tokens == 0);
  decoder.forget_measurements();
  r = decoder.generate(prompt, o);
  CHECK(r.stats.drafted_at.size() == 8);
  CHECK(r.tokens == plain.tokens);
  o.policy.every = 4;
  // Trees planned from a wide first shape, greedy.
  o.tree = {4, 2, 2};
  o.policy.cost = curve(40, [](std::size_t n) { return 1.0 + 0.01 * static_cast<double>(n); });
  r = decoder.generate(prompt, o);
  CHECK(r.tokens == plain.tokens);

  // Sampled: each step is lossless whatever shape the past chose, so the joint law holds.
  table_model small({.vocab_size = 5, .order = 3, .seed = 21, .scale = 1.5f});
  table_model small_draft(
      {.vocab_size = 5, .order = 3, .seed = 21, .scale = 1.5f, .mix = 0.6f, .mix_seed = 4});
  specdec::model_drafter<table_model> small_drafter(small_draft);
  specdec::speculative_decoder small_decoder(small, small_drafter);
  const std::vector<token_id> p2{1, 2};
  specdec::generate_options s;
  s.sampling.temperature = 1.0f;
  s.draft_length = 3;
  s.policy.every = 1;
  s.policy.cost = curve(40, [](std::size_t n) { return 1.0 + 0.3 * static_cast<double>(n); });
  const auto expected = specdec::test::exact_joint(small, p2, 3, s.sampling);
  const auto got = specdec::test::sample_first_three(small_decoder, p2, s, 5, 40000, 99);
  const auto chi = specdec::test::chi_square(got.counts, expected);
  INFO(chi.describe());
  CHECK(chi.pass());
}

TEST_CASE("tree_plan: a bad re-planning cost is refused and the decoder stays usable") {
  table_model target({.vocab_size = 8, .order = 2, .seed = 3});
  table_model draft_model({.vocab_size = 8, .order = 2, .seed = 3, .mix = 0.3f, .mix_seed = 5});
  specdec::model_drafter<table_model> drafter(draft_model);
  specdec::speculative_decoder decoder(target, drafter);
  const std::vector<token_id> prompt{1, 2, 3};
  specdec::generate_options o;
  o.max_new_tokens = 10;
  o.policy.every = 2;
  CHECK_THROWS_WITH(decoder.generate(prompt, o),
                    Catch::Contains("generate_options.policy.cost.target"));
  o.policy.cost = curve(8, [](std::size_t) { return 1.0; });
  o.policy.cost.target[2] = std::nan("");
  CHECK_THROWS_WITH(decoder.generate(prompt, o),
                    Catch::Contains("generate_options.policy.cost.target[2]"));
  o.policy.every = 0;
  CHECK(decoder.generate(prompt, o).tokens.size() == 10);
}

TEST_CASE("tree_plan: predict_plan of a shape whose node count overflows") {
  // 5 + 5 k = 3 (mod 2^64) for k = 3 / 5 - 1 (mod 2^64): a wrapped count fits the cost curve.
  std::size_t inverse = 5;  // Newton: 5 x inverse = 1 (mod 2^64)
  for (int i = 0; i < 6; ++i) inverse *= 2 - 5 * inverse;
  const std::size_t k = 3 * inverse - 1;
  REQUIRE(5 + 5 * k == 3);
  specdec::acceptance_profile profile{{{0.5}, {0.5}}};
  specdec::step_cost_model cost{{0.0, 1.0, 1.0, 1.0, 1.0, 1.0}};
  const auto p = specdec::predict_plan({5, k}, profile, cost);
  CHECK(p.nodes == SIZE_MAX);  // saturated
  CHECK(p.seconds_per_step == 0.0);
  const auto fits = specdec::predict_plan({2, 1}, profile, cost);
  CHECK(fits.nodes == 4);
  CHECK(fits.seconds_per_step == 1.0);
}
