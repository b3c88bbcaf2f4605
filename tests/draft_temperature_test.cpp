// generate_options::draft_temperature: drafters sample at their own temperature while the target
// samples at its own; the verifiers judge each draft against the q it was drawn from, so the
// emitted tokens keep the target's law exactly (chi-square of every position's 3-token window
// against the exact law, support/window_law_runs.hpp), with the deepest position reached. 0 makes
// the drafts deterministic (the drafters' top tokens). Greedy targets ignore it.
#include <catch2/catch.hpp>
#include <limits>
#include <span>
#include <specdec/decoder.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "support/tree_table_model.hpp"
#include "support/window_law_runs.hpp"

namespace {

using namespace specdec::test::law;

const sampling_params target_warp{.temperature = 0.8f, .top_k = 3, .top_p = 0.9f};

}  // namespace

TEST_CASE("draft temperature: model drafter chains and trees keep the target's law") {
  const int trials = 8000;
  for (const float t : {0.0f, 0.5f, 1.6f}) {
    const std::string at = "draft T = " + std::to_string(t).substr(0, 3);
    SECTION(at + ", token-wise K = 6") {
      auto o = options_of(target_warp, 7);
      o.draft_length = 6;
      o.draft_temperature = t;
      check_law(run_model_drafter<table_model>(o, trials, 100), target_warp, 6);
    }
    SECTION(at + ", block K = 4") {
      auto o = options_of(target_warp, 5);
      o.draft_length = 4;
      o.draft_temperature = t;
      o.verification = specdec::verification_rule::block;
      check_law(run_model_drafter<table_model>(o, trials, 200), target_warp, 4);
    }
    SECTION(at + ", tree 2x2x2 without replacement") {
      auto o = options_of(target_warp, 4);
      o.tree = {2, 2, 2};
      o.tree_draw = candidate_draw::without_replacement;
      o.draft_temperature = t;
      check_law(run_model_drafter<specdec::test::tree_table_model>(o, trials, 300), target_warp,
                3);
    }
  }
}

TEST_CASE("draft temperature: EAGLE-style heads, chains of 8 and i.i.d. trees") {
  const int trials = 8000;
  for (const float t : {0.0f, 0.5f}) {
    for (const bool tree : {false, true}) {
      SECTION("draft T = " + std::to_string(t).substr(0, 3) + (tree ? ", tree 2x2x2" : ", chain")) {
        // T = 0.8 without top-k / top-p: deterministic drafts repeat the same first chain every
        // run, and under the truncating warp one of its tokens has p = 0.
        const sampling_params target_t{.temperature = 0.8f};
        const std::size_t k = tree ? 3 : 8;
        auto o = options_of(target_t, k + 1);
        o.draft_length = k;
        if (tree) o.tree = {2, 2, 2};
        o.draft_temperature = t;
        with_heads(head_kind::eagle, specdec::head_candidates::sampled,
                   [&](auto& drafter, capture& cap) {
                     specdec::speculative_decoder decoder(cap, drafter);
                     check_law(run_decoder(decoder, o, trials, 500), target_t, k);
                   });
      }
    }
  }
}

namespace {

// A drafter that records the sampling_params it is given, then drafts with `inner`.
struct spy_drafter {
  model_drafter_t& inner;
  std::vector<float> temperatures;
  void propose(std::span<const token_id> history, std::size_t k, const sampling_params& sp,
               specdec::rng& g, specdec::draft& out) {
    temperatures.push_back(sp.temperature);
    inner.propose(history, k, sp, g, out);
  }
  void accept(std::span<const token_id> c) { inner.accept(c); }
  void reset() { inner.reset(); }
};

}  // namespace

TEST_CASE("draft temperature: ignored by greedy targets - given to drafters when sampling") {
  table_model target(target_table), draft_model(draft_table);
  model_drafter_t inner(draft_model);
  spy_drafter spy{inner, {}};
  specdec::speculative_decoder decoder(target, spy);
  auto o = options_of({.temperature = 0.0f}, 30);
  const auto plain = decoder.generate(prompt, o).tokens;
  o.draft_temperature = 1.5f;
  CHECK(decoder.generate(prompt, o).tokens == plain);
  for (float t : spy.temperatures) CHECK(t == 0.0f);
  spy.temperatures.clear();
  auto s = options_of(target_warp, 12);
  s.draft_temperature = 0.0f;  // deterministic drafts under a sampling target
  const auto sampled = decoder.generate(prompt, s);
  CHECK(sampled.tokens.size() == 12);
  REQUIRE(!spy.temperatures.empty());
  for (float t : spy.temperatures) CHECK(t == 0.0f);
  s.draft_temperature.reset();  // unset: the target's
  decoder.generate(prompt, s);
  CHECK(spy.temperatures.back() == 0.8f);
}

TEST_CASE("draft temperature: bad values name the field") {
  table_model target(target_table);
  specdec::no_drafter none;
  specdec::speculative_decoder decoder(target, none);
  for (const float bad : {-0.5f, std::numeric_limits<float>::infinity(), 1e-39f}) {
    auto o = options_of(target_warp, 4);
    o.draft_temperature = bad;
    CHECK_THROWS_WITH(decoder.generate(prompt, o),
                      Catch::Contains("generate_options.draft_temperature"));
  }
}
