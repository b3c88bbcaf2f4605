// The speed policy (generate_options::policy.explore, decode/replan.hpp): where every K loses it
// drafts nothing or only bounded probes; with a cheap curve and high acceptance it goes deep; a
// draft that starts bad and turns good is re-planned upward (the plain re-planner stays at
// K = 0); greedy output and the sampled joint law are those of plain decoding. Costs are given as
// numbers: "time" below is the cost curve summed over the steps taken, never a clock.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstddef>
#include <deque>
#include <numeric>
#include <span>
#include <specdec/batch/sequence_view.hpp>
#include <specdec/batch_decoder.hpp>
#include <specdec/decoder.hpp>
#include <specdec/draft/model_drafter.hpp>
#include <specdec/tree/tree_plan.hpp>
#include <vector>

#include "support/batch_table_model.hpp"
#include "support/chi_square.hpp"
#include "support/exact_joint.hpp"
#include "support/four_member_model.hpp"
#include "support/table_model.hpp"
#include "support/tree_table_model.hpp"

namespace {

using specdec::acceptance_profile;
using specdec::step_cost_model;
using specdec::token_id;
using specdec::test::table_model;
using drafter_t = specdec::model_drafter<table_model>;

step_cost_model curve(std::size_t n_max, double fixed, double per_token) {
  step_cost_model c;
  c.target.assign(n_max + 1, 0.0);
  for (std::size_t n = 1; n <= n_max; ++n) c.target[n] = fixed + per_token * static_cast<double>(n);
  return c;
}

// Drafts the target's own greedy tokens (a copy of it drafts them) once the history holds
// `switch_at` tokens, and before that each of them plus one, which a greedy target never keeps.
class late_drafter {
 public:
  late_drafter(table_model& copy, std::size_t switch_at) : inner_(copy), switch_at_(switch_at) {}
  std::size_t vocab_size() const { return inner_.vocab_size(); }
  void reset() { inner_.reset(); }
  void accept(std::span<const token_id> c) { inner_.accept(c); }
  void propose(std::span<const token_id> history, std::size_t k, const specdec::sampling_params& sp,
               specdec::rng& g, specdec::draft& out) {
    inner_.propose(history, k, sp, g, out);
    if (history.size() < switch_at_)
      for (auto& t : out.tokens) t = static_cast<token_id>((t + 1) % 16);
  }

 private:
  drafter_t inner_;
  std::size_t switch_at_;
};

// What a generation did, step by step: draft positions and tokens emitted.
struct step_log {
  std::vector<std::size_t> drafted, emitted;
  std::vector<token_id> tokens;
  // Modelled tokens per second over plain decoding's (1 / t(1)), from the cost curve alone.
  double speed_over_plain(const step_cost_model& c) const {
    double seconds = 0.0;
    for (std::size_t k : drafted) seconds += c.seconds(k, k);
    const double tokens = std::accumulate(emitted.begin(), emitted.end(), 0.0);
    return tokens / seconds * c.target[1];
  }
  std::size_t steps_drafting(std::size_t from, std::size_t to) const {
    std::size_t n = 0;
    for (std::size_t i = from; i < to; ++i) n += drafted[i] > 0;
    return n;
  }
};

template <class Decoder>
step_log run_steps(Decoder& decoder, const std::vector<token_id>& prompt,
                   const specdec::generate_options& o) {
  step_log log;
  decoder.start(prompt, o);
  while (!decoder.done()) {
    const auto r = decoder.step();
    log.drafted.push_back(r.drafted);
    log.emitted.push_back(r.tokens.size());
    log.tokens.insert(log.tokens.end(), r.tokens.begin(), r.tokens.end());
  }
  return log;
}

specdec::generate_options policy_options(const step_cost_model& cost) {
  specdec::generate_options o;
  o.policy = specdec::speed_policy(cost);
  return o;
}

}  // namespace

TEST_CASE("replan: optimistic profile reaches one step past the evidence") {
  specdec::decode_stats s;
  SECTION("nothing measured: depth 0 at rate 1, nothing deeper") {
    const auto p = acceptance_profile::optimistic(s, 1.0, 8);
    REQUIRE(p.rate.size() == 1);
    CHECK(p.rate[0] == std::vector<double>{1.0});
  }
  SECTION("measured cells, one more rank, one more depth after an acceptance") {
    s.offered_at_rank = {{10, 4}, {5}};
    s.accepted_at_rank = {{6, 1}, {0}};
    const auto p = acceptance_profile::optimistic(s, 1.0, 8);
    REQUIRE(p.rate.size() == 2);  // depth 1 accepted nothing: depth 2 is not reached
    REQUIRE(p.rate[0].size() == 3);
    CHECK(p.rate[0][0] == Approx(7.0 / 11));
    // Rank 1, pooled over the depths: its 4 offers had room 1 - 6/10 below them and took 1,
    // c_1 = (1 + 1) / (4 x 0.4 + 1); its pseudo-sample is that share of the room.
    const double c1 = 2.0 / 2.6;
    CHECK(p.rate[0][1] == Approx((1 + 4.0 / 11 * c1) / 5));
    const double below = 7.0 / 11 + (1 + 4.0 / 11 * c1) / 5;
    // Rank 2, never offered: the room left, at rank 1's share (no better than a second).
    CHECK(p.rate[0][2] == Approx((1 - below) * c1));
    REQUIRE(p.rate[1].size() == 2);
    CHECK(p.rate[1][0] == Approx(1.0 / 6));
    CHECK(p.rate[1][1] == Approx(5.0 / 6 * c1));  // never offered at depth 1: depth 0's share
    CHECK(acceptance_profile::optimistic(s, 1.0, 8, 1).rate[0].size() == 1);
    CHECK(acceptance_profile::optimistic(s, 1.0, 1).rate.size() == 1);
  }
  SECTION("second candidates refuted at one depth are not tried depth by depth") {
    // Depth 0 branched 20 times and its second candidate took 2 of the room the first left;
    // depths 1-3 (accepting about half) were reached by chains only.
    s.offered_at_rank = {{40, 20}, {30}, {25}, {20}};
    s.accepted_at_rank = {{20, 2}, {15}, {12}, {10}};
    const auto p = acceptance_profile::optimistic(s, 1.0, 8, 2);
    const double c1 = 3.0 / (20 * (1 - 20.0 / 40) + 1);  // (2 + 1) / (offered x room + 1)
    REQUIRE(p.rate.size() == 5);
    for (std::size_t d = 1; d < 4; ++d) {
      REQUIRE(p.rate[d].size() == 2);
      CHECK(p.rate[d][1] == Approx((1 - p.rate[d][0]) * c1));
    }
    // Where width is nearly free, the plan is a chain; optimism about each depth's second
    // candidate alone (all the room, 0.48-0.5) planned 1x2x2.
    step_cost_model cost;
    cost.target = {0.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.05, 1.1, 1.15, 1.2};
    const auto plan = specdec::plan_tree(p, cost, 8, 8, 2);
    CHECK(plan.branching == std::vector<std::size_t>{1, 1, 1, 1});
  }
  SECTION("a bad prior is refused") {
    CHECK_THROWS_WITH(acceptance_profile::optimistic(s, 0.0, 8),
                      "acceptance_profile::optimistic: prior must be > 0 and finite");
  }
}

TEST_CASE("replan: an expected profile stands in for the evidence until counts take over") {
  specdec::decode_stats s;
  acceptance_profile expected;
  expected.rate = {{0.5, 0.25}, {0.5}, {0.0}};
  SECTION("nothing measured: its depths and ranks, then one past its last acceptance") {
    const auto p = acceptance_profile::optimistic(s, 1.0, 8, 8, expected, 4.0);
    REQUIRE(p.rate.size() == 3);  // depth 2 expects nothing accepted: depth 3 is not reached
    CHECK(p.rate[0] == std::vector<double>{0.5, 0.25, 0.25});  // rank 2: the optimistic room
    CHECK(p.rate[1] == std::vector<double>{0.5, 0.5});
    CHECK(p.rate[2] == std::vector<double>{0.0, 1.0});
  }
  SECTION("counts pull a cell from its expected rate, with expected_samples as its weight") {
    s.offered_at_rank = {{12}, {6}};
    s.accepted_at_rank = {{12}, {0}};
    const auto p = acceptance_profile::optimistic(s, 1.0, 8, 1, expected, 4.0);
    // The expectation scaled by the measured cells: 12 accepted where it predicted 12 x 0.5 +
    // 6 x 0.5 = 9, each side with 4 pseudo-samples.
    const double scale = (12.0 + 4) / (9.0 + 4);
    REQUIRE(p.rate.size() == 3);
    CHECK(p.rate[0][0] == Approx((12 + 4 * 0.5 * scale) / 16));
    CHECK(p.rate[1][0] == Approx((0 + 4 * 0.5 * scale) / 10));
    CHECK(p.rate[2][0] == 0.0);
  }
  SECTION("what the measured depths say carries to the deeper ones, up and down") {
    // Heads whose carried accuracy is 0.6 a depth, measured on a shallow chain of 3.
    expected.rate.assign(6, {0.6});
    s.offered_at_rank = {{100}, {90}, {80}};
    SECTION("greedy, accepting 0.9 a depth: the unmeasured depths are expected higher") {
      s.accepted_at_rank = {{90}, {81}, {72}};
      const auto p = acceptance_profile::optimistic(s, 1.0, 8, 1, expected, 8.0);
      const double scale = (243.0 + 8) / (270 * 0.6 + 8);
      REQUIRE(p.rate.size() == 7);
      CHECK(p.rate[3][0] == Approx(0.6 * scale));
      CHECK(p.rate[3][0] > 0.85);
      CHECK(p.rate[5][0] == Approx(0.6 * scale));
    }
    SECTION("a hot temperature, accepting 0.3 a depth: lower") {
      s.accepted_at_rank = {{30}, {27}, {24}};
      const auto p = acceptance_profile::optimistic(s, 1.0, 8, 1, expected, 8.0);
      REQUIRE(p.rate.size() == 7);
      CHECK(p.rate[3][0] == Approx(0.6 * (81.0 + 8) / (270 * 0.6 + 8)));
      CHECK(p.rate[3][0] < 0.35);
    }
    SECTION("never above 1") {
      expected.rate = {{0.5}, {0.5}, {0.5}, {0.8}, {0.8}, {0.8}};
      s.accepted_at_rank = {{100}, {90}, {80}};
      const auto p = acceptance_profile::optimistic(s, 1.0, 8, 1, expected, 8.0);
      CHECK(p.rate[3][0] == 1.0);  // 0.8 x (270 + 8) / (135 + 8), capped
    }
  }
  SECTION("an expected rate above the room left is capped") {
    expected.rate = {{0.75, 0.75}};
    const auto p = acceptance_profile::optimistic(s, 1.0, 8, 8, expected, 4.0);
    CHECK(p.rate[0][1] == Approx(0.25));
  }
  SECTION("bad expected_samples are refused") {
    CHECK_THROWS_WITH(acceptance_profile::optimistic(s, 1.0, 8, 8, expected, 0.0),
                      "acceptance_profile::optimistic: expected_samples must be > 0 and finite");
  }
}

TEST_CASE("replan: where every K loses the policy decodes plainly, probes bounded") {
  table_model target({.vocab_size = 16, .order = 3, .seed = 7});
  const std::vector<token_id> prompt{3, 1, 4, 1, 5};
  SECTION("t(n) = n: even an exact draft cannot pay, nothing is drafted") {
    table_model copy({.vocab_size = 16, .order = 3, .seed = 7});
    drafter_t oracle(copy);
    specdec::speculative_decoder decoder(target, oracle);
    auto cost = curve(40, 0.0, 1.0);
    auto o = policy_options(cost);
    o.max_new_tokens = 300;
    o.sampling.temperature = 0.0f;
    const auto log = run_steps(decoder, prompt, o);
    CHECK(log.steps_drafting(0, log.drafted.size()) == 0);
    CHECK(log.speed_over_plain(cost) == Approx(1.0));
    cost.draft_per_level = 0.1;
    o.policy.cost = cost;
    CHECK(decoder.generate(prompt, o).stats.drafted_tokens == 0);
  }
  SECTION("t(n) = 0.9 n + 0.1: a draft pays only above 0.9 acceptance; probes stay rare") {
    table_model draft_model({.vocab_size = 16, .order = 3, .seed = 7, .mix = 0.5f, .mix_seed = 9});
    drafter_t drafter(draft_model);
    specdec::speculative_decoder decoder(target, drafter);
    const auto cost = curve(40, 0.1, 0.9);
    auto o = policy_options(cost);
    o.policy.min_gain = 0.0;  // the bound on the probes themselves (the margin would hide them)
    o.max_new_tokens = 2000;
    o.sampling.temperature = 1.0f;
    const auto log = run_steps(decoder, prompt, o);
    INFO("steps " << log.drafted.size() << ", drafting "
                  << log.steps_drafting(0, log.drafted.size()));
    CHECK(log.steps_drafting(0, log.drafted.size()) * 50 <= log.drafted.size());  // <= 2%
    CHECK(log.speed_over_plain(cost) >= 0.985);  // 0.993: docs/trees.md
  }
}

TEST_CASE("replan: min_gain keeps plain decoding where a shape would gain less") {
  // t(2) = 1.9 t(1): an exact K = 1 draft would gain 2 / 1.9 = 5% (and K = 2, 3 / 2.8 = 7%).
  // speed_policy's margin of 10% never leaves plain decoding for that; with no margin the
  // policy probes and climbs.
  table_model target({.vocab_size = 16, .order = 3, .seed = 7});
  table_model copy({.vocab_size = 16, .order = 3, .seed = 7});
  drafter_t oracle(copy);
  specdec::speculative_decoder decoder(target, oracle);
  const std::vector<token_id> prompt{3, 1, 4, 1, 5};
  const auto cost = curve(40, 0.1, 0.9);
  auto o = policy_options(cost);
  CHECK(o.policy.min_gain == 0.1);
  o.max_new_tokens = 200;
  o.sampling.temperature = 0.0f;
  CHECK(decoder.generate(prompt, o).stats.drafted_tokens == 0);
  CHECK(decoder.plan().branching.empty());
  o.policy.min_gain = 0.0;
  decoder.forget_measurements();
  const auto log = run_steps(decoder, prompt, o);
  CHECK(log.steps_drafting(0, log.drafted.size()) > 0);
  CHECK(log.speed_over_plain(cost) > 1.0);
  // A gain above the margin is taken: a cheap curve with the exact draft.
  o.policy = specdec::speed_policy(curve(40, 1.0, 0.05));
  decoder.forget_measurements();
  CHECK(decoder.generate(prompt, o).stats.drafted_tokens > 0);
}

TEST_CASE("replan: a cheap curve and an exact draft go as deep as allowed, at once when expected") {
  table_model target({.vocab_size = 16, .order = 3, .seed = 7});
  table_model copy({.vocab_size = 16, .order = 3, .seed = 7});
  drafter_t oracle(copy);
  specdec::speculative_decoder decoder(target, oracle);
  const auto cost = curve(40, 1.0, 0.01);
  auto o = policy_options(cost);
  o.max_new_tokens = 400;
  o.sampling.temperature = 0.0f;
  o.policy.every = 1;
  const auto log = run_steps(decoder, {3, 1, 4, 1, 5}, o);
  // It climbs one position per step from K = 1 and then stays at max_depth.
  REQUIRE(log.drafted.size() > 20);
  for (std::size_t i = 0; i < 8; ++i) CHECK(log.drafted[i] == i + 1);
  for (std::size_t i = 8; i + 1 < log.drafted.size(); ++i) CHECK(log.drafted[i] == 8);
  CHECK(decoder.plan().branching == std::vector<std::size_t>(8, 1));
  CHECK(log.speed_over_plain(cost) > 5.0);
  // Started from an expected profile (what heads' carried accuracy gives), it skips the climb.
  o.policy.expected.rate.assign(8, {0.9});
  decoder.forget_measurements();
  const auto started = run_steps(decoder, {3, 1, 4, 1, 5}, o);
  CHECK(started.tokens == log.tokens);
  CHECK(started.drafted[0] == 8);
  CHECK(started.speed_over_plain(cost) > log.speed_over_plain(cost));
}

TEST_CASE("replan: a shallow start is re-planned deeper (the plain re-planner keeps it)") {
  // The plain re-planner never plans past the depths it measured: started at K = 1 it stays
  // at K = 1 however good the draft is. The policy measures one position past the plan.
  table_model target({.vocab_size = 16, .order = 3, .seed = 7});
  table_model copy({.vocab_size = 16, .order = 3, .seed = 7});
  drafter_t oracle(copy);
  const std::vector<token_id> prompt{3, 1, 4, 1, 5};
  const auto cost = curve(40, 1.0, 0.05);
  auto o = policy_options(cost);
  o.max_new_tokens = 300;
  o.sampling.temperature = 0.0f;
  o.draft_length = 1;
  o.policy.explore = false;
  specdec::speculative_decoder stuck(target, oracle);
  const auto stuck_log = run_steps(stuck, prompt, o);
  CHECK(*std::max_element(stuck_log.drafted.begin(), stuck_log.drafted.end()) == 1);
  CHECK(stuck.plan().branching.size() == 1);
  o.policy.explore = true;
  specdec::speculative_decoder policy(target, oracle);
  const auto log = run_steps(policy, prompt, o);
  CHECK(log.tokens == stuck_log.tokens);
  CHECK(policy.plan().branching.size() == 8);
  CHECK(log.speed_over_plain(cost) > 2 * stuck_log.speed_over_plain(cost));
}

TEST_CASE("replan: acceptance that rises after starting low is re-planned upward") {
  table_model target({.vocab_size = 16, .order = 3, .seed = 7});
  const std::vector<token_id> prompt{3, 1, 4, 1, 5};
  const std::size_t switch_at = prompt.size() + 300;
  specdec::generate_options plain_o;
  plain_o.max_new_tokens = 900;
  plain_o.sampling.temperature = 0.0f;
  const auto plain = specdec::generate_autoregressive(target, prompt, plain_o);
  const auto cost = curve(40, 1.0, 0.05);

  table_model copy({.vocab_size = 16, .order = 3, .seed = 7});
  late_drafter drafter(copy, switch_at);
  specdec::speculative_decoder decoder(target, drafter);
  auto o = policy_options(cost);
  o.max_new_tokens = plain_o.max_new_tokens;
  o.sampling.temperature = 0.0f;
  o.policy.every = 1;
  o.policy.half_life = 32;
  const auto log = run_steps(decoder, prompt, o);
  CHECK(log.tokens == plain.tokens);
  // Before the switch every step emits one token: at most K = 1 probes, which never pay.
  REQUIRE(log.drafted.size() > 300);
  std::size_t most = 0;
  for (std::size_t i = 0; i < 290; ++i) most = std::max(most, log.drafted[i]);
  CHECK(most == 1);
  CHECK(log.steps_drafting(50, 290) * 2 < 240);  // the probes: a minority of the steps
  // After the switch it finds the exact draft and ends at max_depth.
  CHECK(*std::max_element(log.drafted.end() - 20, log.drafted.end()) == 8);
  CHECK(decoder.plan().branching.size() == 8);
  CHECK(log.drafted.size() < 300 + (900 - 300) / 4);

  // The re-planner without exploration plans K = 0 from the bad start and never measures again.
  late_drafter drafter2(copy, switch_at);
  specdec::speculative_decoder stuck(target, drafter2);
  o.policy.explore = false;
  const auto stuck_log = run_steps(stuck, prompt, o);
  CHECK(stuck_log.tokens == plain.tokens);
  CHECK(stuck_log.steps_drafting(50, stuck_log.drafted.size()) == 0);
}

TEST_CASE("replan: the policy keeps greedy output and the sampled joint law") {
  table_model target({.vocab_size = 16, .order = 3, .seed = 7});
  table_model draft_model({.vocab_size = 16, .order = 3, .seed = 7, .mix = 0.35f, .mix_seed = 9});
  drafter_t drafter(draft_model);
  specdec::speculative_decoder decoder(target, drafter);
  const std::vector<token_id> prompt{3, 1, 4, 1, 5};
  specdec::generate_options plain_o;
  plain_o.max_new_tokens = 200;
  plain_o.sampling.temperature = 0.0f;
  const auto plain = specdec::generate_autoregressive(target, prompt, plain_o);
  for (const bool trees : {false, true}) {
    auto o = policy_options(curve(40, 1.0, 0.02));
    o.max_new_tokens = plain_o.max_new_tokens;
    o.sampling.temperature = 0.0f;
    o.policy.every = 1;
    o.policy.half_life = 16;
    if (trees) o.tree = {2, 2};
    INFO("trees " << trees);
    CHECK(decoder.generate(prompt, o).tokens == plain.tokens);
    CHECK(!decoder.plan().branching.empty());
  }

  // Sampled: every step is lossless whatever shape the past chose, so the joint law of the
  // first three tokens holds with a plan every call, chains and trees.
  table_model small({.vocab_size = 5, .order = 3, .seed = 21, .scale = 1.5f});
  table_model small_draft(
      {.vocab_size = 5, .order = 3, .seed = 21, .scale = 1.5f, .mix = 0.6f, .mix_seed = 4});
  drafter_t small_drafter(small_draft);
  specdec::speculative_decoder small_decoder(small, small_drafter);
  const std::vector<token_id> p2{1, 2};
  for (const bool trees : {false, true}) {
    auto s = policy_options(curve(40, 1.0, trees ? 0.05 : 0.3));
    s.sampling.temperature = 1.0f;
    s.policy.every = 1;
    s.policy.half_life = 4;
    if (trees) {
      s.tree = {2, 1};
      s.policy.max_nodes = 6;  // a small search: a plan every call of 40,000 runs
      s.policy.max_depth = 3;
    }
    small_decoder.forget_measurements();
    const auto expected = specdec::test::exact_joint(small, p2, 3, s.sampling);
    const auto got = specdec::test::sample_first_three(small_decoder, p2, s, 5, 40000, 99);
    const auto chi = specdec::test::chi_square(got.counts, expected);
    INFO("trees " << trees << ": " << chi.describe());
    CHECK(chi.pass());
    CHECK(got.accepted > 1000);  // it did speculate
  }
}

TEST_CASE("replan: in batch_decoder each sequence plans as it would alone") {
  // Each sequence_state plans from its own counts, so a sequence under the policy emits in a
  // batch exactly what the single-sequence decoder emits for it (greedy, sampled, trees).
  using specdec::test::batch_table_model;
  using view_t = specdec::sequence_view<batch_table_model>;
  const specdec::test::table_model_options target_table{.vocab_size = 16, .order = 3, .seed = 7};
  const specdec::test::table_model_options draft_table{
      .vocab_size = 16, .order = 3, .seed = 7, .mix = 0.35f, .mix_seed = 9};
  std::vector<std::pair<std::vector<token_id>, specdec::generate_options>> requests(3);
  for (auto& [prompt, o] : requests) {
    o = policy_options(curve(40, 1.0, 0.03));
    o.max_new_tokens = 80;
  }
  requests[0].first = {3, 1, 4, 1, 5};
  requests[0].second.sampling.temperature = 0.0f;
  requests[1].first = {2, 7};
  requests[1].second.sampling = {.temperature = 0.9f, .seed = 11};
  requests[2].first = {9, 9, 2};
  requests[2].second.sampling = {.temperature = 0.7f, .seed = 13};
  requests[2].second.tree = {2, 2};

  batch_table_model model({.model = target_table});
  std::deque<table_model> draft_models;
  std::deque<drafter_t> drafters;
  specdec::batch_decoder<batch_table_model, drafter_t> batch(model);
  std::vector<specdec::sequence_id> ids;
  for (const auto& [prompt, o] : requests) {
    draft_models.emplace_back(draft_table);
    ids.push_back(batch.add(prompt, o, drafters.emplace_back(draft_models.back())));
  }
  while (batch.running_count() > 0) batch.step();
  for (std::size_t i = 0; i < requests.size(); ++i) {
    batch_table_model alone_model({.model = target_table});
    view_t view(alone_model, alone_model.create_sequence());
    table_model draft_model(draft_table);
    drafter_t drafter(draft_model);
    specdec::speculative_decoder decoder(view, drafter);
    const auto alone = decoder.generate(requests[i].first, requests[i].second);
    INFO("sequence " << i);
    CHECK(batch.result(ids[i]).tokens == alone.tokens);
    CHECK(alone.stats.drafted_tokens > 0);
  }
}

TEST_CASE("replan: the policy's options are checked at the entry") {
  table_model target({.vocab_size = 8, .order = 2, .seed = 3});
  table_model draft_model({.vocab_size = 8, .order = 2, .seed = 3, .mix = 0.3f, .mix_seed = 5});
  drafter_t drafter(draft_model);
  specdec::speculative_decoder decoder(target, drafter);
  const std::vector<token_id> prompt{1, 2, 3};
  auto o = policy_options(curve(8, 1.0, 0.1));
  o.max_new_tokens = 10;
  o.policy.every = 0;
  CHECK_THROWS_WITH(decoder.generate(prompt, o),
                    "generate_options.policy.explore: needs policy.every >= 1");
  o.policy.every = 4;
  o.policy.optimism = 0.0;
  CHECK_THROWS_WITH(decoder.generate(prompt, o),
                    "generate_options.policy.optimism: must be > 0 and finite");
  o.policy.optimism = 1.0;
  o.policy.min_gain = -0.1;
  CHECK_THROWS_WITH(decoder.generate(prompt, o),
                    "generate_options.policy.min_gain: must be >= 0 and finite");
  o.policy.min_gain = 0.1;
  o.policy.expected.rate = {{0.5}, {}};
  CHECK_THROWS_WITH(decoder.generate(prompt, o),
                    "generate_options.policy.expected.rate[1]: is empty");
  o.policy.expected.rate = {{1.5}};
  CHECK_THROWS_WITH(decoder.generate(prompt, o),
                    "generate_options.policy.expected.rate[0]: a rate outside [0, 1]");
  o.policy.expected.rate = {{0.5, 0.6}};
  CHECK_THROWS_WITH(decoder.generate(prompt, o),
                    "generate_options.policy.expected.rate[0]: the rates sum past 1");
  o.policy.expected.rate = {{0.5}};
  o.policy.expected_samples = 0.0;
  CHECK_THROWS_WITH(decoder.generate(prompt, o),
                    "generate_options.policy.expected_samples: must be > 0 and finite");
  o.policy.expected = {};
  o.policy.expected_samples = 8.0;
  o.policy.cost.target.clear();
  CHECK_THROWS_WITH(decoder.generate(prompt, o),
                    Catch::Contains("generate_options.policy.cost.target"));
  o.policy = specdec::speed_policy(curve(8, 1.0, 0.1));
  CHECK(decoder.generate(prompt, o).tokens.size() == 10);
}

using specdec::test::four_member_model;

TEST_CASE("replan: on a model without append_tree the policy plans chains, and the statistics count calls") {
  // The cost curve makes trees worth planning where one call scores them (a cheap wide call),
  // and the draft is sampled and good: on tree_table_model (append_tree) the policy plans trees.
  const auto cost = curve(40, 1.0, 0.01);
  specdec::generate_options o = policy_options(cost);
  o.max_new_tokens = 200;
  o.sampling.temperature = 1.0f;
  o.sampling.seed = 11;
  o.policy.every = 1;
  {
    specdec::test::tree_table_model tree_target({.vocab_size = 16, .order = 3, .seed = 7});
    table_model copy({.vocab_size = 16, .order = 3, .seed = 8});
    drafter_t drafter(copy);
    specdec::speculative_decoder decoder(tree_target, drafter);
    bool planned_tree = false;
    decoder.start(std::vector<token_id>{3, 1, 4}, o);
    while (!decoder.done()) {
      decoder.step();
      const auto& b = decoder.plan().branching;
      planned_tree |= std::any_of(b.begin(), b.end(), [](std::size_t k) { return k > 1; });
    }
    CHECK(planned_tree);  // the case is reached: trees pay where one call scores them
    CHECK(decoder.stats().target_calls == decoder.stats().steps);
  }
  // The same on the four-member adapter: only chains are planned, one call a step.
  table_model inner({.vocab_size = 16, .order = 3, .seed = 7});
  four_member_model<table_model> target(inner);
  table_model copy({.vocab_size = 16, .order = 3, .seed = 8});
  drafter_t drafter(copy);
  specdec::speculative_decoder decoder(target, drafter);
  decoder.start(std::vector<token_id>{3, 1, 4}, o);
  const std::size_t after_prompt = target.appends;
  while (!decoder.done()) {
    decoder.step();
    const auto& b = decoder.plan().branching;
    CHECK(std::all_of(b.begin(), b.end(), [](std::size_t k) { return k == 1; }));
  }
  const auto& st = decoder.stats();
  CHECK(st.drafted_tokens > 0);
  CHECK(st.target_calls == target.appends - after_prompt);
  CHECK(st.steps == st.target_calls);

  // A tree the caller asks for on that adapter is scored path by path: the statistics count each
  // append (one per leaf and one to commit), the steps apart.
  specdec::generate_options fixed;
  fixed.max_new_tokens = 60;
  fixed.sampling.temperature = 1.0f;
  fixed.sampling.seed = 5;
  fixed.tree = {2, 2};
  decoder.start(std::vector<token_id>{3, 1, 4}, fixed);
  const std::size_t before = target.appends;
  while (!decoder.done()) decoder.step();
  const auto& t = decoder.stats();
  CHECK(t.target_calls == target.appends - before);
  CHECK(t.target_calls > t.steps);
  CHECK(t.tokens_per_step() > t.tokens_per_target_call());
  CHECK(t.summary().find(" steps, ") != std::string::npos);  // steps printed beside calls
}
