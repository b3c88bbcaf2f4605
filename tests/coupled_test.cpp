// Coupled sampling (generate_options::verification = coupled, math/coupled.hpp,
// verify/coupled.hpp): a sampled generation's tokens are a function of the seed, the prompt and
// the rows alone, so speculative decoding emits plain decoding's tokens whatever the drafter, K,
// tree, batch or plan; the law of those tokens is the target's; coupled drafts of a close draft
// are accepted at least as often as sample-and-match drafts.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <specdec/specdec.hpp>

#include "support/batch_table_model.hpp"
#include "support/chain_sim.hpp"
#include "support/chi_square.hpp"
#include "support/table_model.hpp"
#include "support/tree_table_model.hpp"
#include "support/window_law_runs.hpp"

namespace {

using specdec::candidate_draw;
using specdec::verification_rule;
using specdec::coupled_key;
using specdec::generate_options;
using specdec::sampling_params;
using specdec::token_id;
using specdec::test::table_model;
using specdec::test::table_model_options;

sampling_params at(float temperature, std::size_t top_k = 0, float top_p = 1.0f,
                   float min_p = 0.0f) {
  sampling_params sp;
  sp.temperature = temperature;
  sp.top_k = top_k;
  sp.top_p = top_p;
  sp.min_p = min_p;
  return sp;
}

}  // namespace

TEST_CASE("coupled: the race's winner is an exact draw, its first k a draw without replacement") {
  const std::vector<float> p{0.5f, 0.25f, 0.125f, 0.0625f, 0.0625f, 0.0f};
  const std::vector<double> pd(p.begin(), p.end());
  specdec::coupled_workspace ws;
  std::vector<std::size_t> first(p.size(), 0);
  std::map<std::pair<token_id, token_id>, std::size_t> pairs;
  std::vector<token_id> top;
  const int trials = 60000;
  for (int t = 0; t < trials; ++t) {
    const coupled_key key(7, static_cast<std::size_t>(t));
    const token_id x = specdec::coupled_draw(p, key, ws);
    first[static_cast<std::size_t>(x)]++;
    specdec::coupled_top(p, key, 2, top, ws);
    REQUIRE(top.size() == 2);
    CHECK(top[0] == x);  // the draw is the race's first
    CHECK(top[1] != x);
    pairs[{top[0], top[1]}]++;
  }
  const auto chi = specdec::test::chi_square(first, pd);
  INFO(chi.describe());
  CHECK(chi.pass());
  CHECK(first[5] == 0);  // weight 0 never wins
  // The pair's law without replacement: p_a * p_b / (1 - p_a).
  std::vector<std::size_t> counts;
  std::vector<double> law;
  for (std::size_t a = 0; a < 5; ++a)
    for (std::size_t b = 0; b < 5; ++b) {
      if (a == b) continue;
      counts.push_back(pairs[{static_cast<token_id>(a), static_cast<token_id>(b)}]);
      law.push_back(pd[a] * pd[b] / (1.0 - pd[a]));
    }
  const auto pair_chi = specdec::test::chi_square(counts, law);
  INFO(pair_chi.describe());
  CHECK(pair_chi.pass());
  // Fewer positive weights than asked: all of them.
  specdec::coupled_top(std::vector<float>{0.0f, 2.0f, 0.0f, 1.0f}, coupled_key(1, 2), 3, top, ws);
  CHECK(top.size() == 2);
  CHECK_THROWS_AS(specdec::coupled_draw(std::vector<float>{0.0f, 0.0f}, coupled_key(1, 2), ws),
                  std::invalid_argument);
}

TEST_CASE("coupled: coupled_sample's fast path from logits draws the same law as the race on p") {
  // V = 1100: a full block of 1024 and a partial one, the likely tokens on the boundary.
  const std::size_t v = 1100;
  std::vector<float> logits(v, -4.0f);
  logits[1022] = 2.0f;
  logits[1023] = 1.5f;
  logits[1024] = 2.0f;
  logits[7] = 1.0f;
  logits[1099] = -std::numeric_limits<float>::infinity();
  const sampling_params sp = at(0.8f);
  std::vector<float> p(v);
  specdec::warp(logits, sp, p);
  specdec::coupled_workspace ws;
  std::vector<std::size_t> counts(v, 0);
  std::size_t agree = 0;
  const int trials = 40000;
  for (int t = 0; t < trials; ++t) {
    const coupled_key key(3, static_cast<std::size_t>(t));
    const token_id x = specdec::coupled_sample(logits, sp, key, ws);
    counts[static_cast<std::size_t>(x)]++;
    agree += x == specdec::coupled_draw(p, key, ws);
  }
  const auto chi = specdec::test::chi_square(counts, std::vector<double>(p.begin(), p.end()));
  INFO(chi.describe());
  CHECK(chi.pass());
  CHECK(counts[1099] == 0);
  CHECK(agree >= static_cast<std::size_t>(trials) - 2);  // the two paths round p apart by 1 ulp
}

TEST_CASE("coupled: the fast paths keep the law on a flat row of 3000 tokens") {
  // Every token matters here (p from 1e-4 to 1e-3), so a screen that dropped candidates, on the
  // packets or in the scalar tail, would show.
  const std::size_t v = 3000;
  std::vector<float> logits(v);
  specdec::rng g(9);
  for (auto& x : logits) x = static_cast<float>(2.0 * g.uniform_open() - 1.0);
  // Temperature alone, and top-p alone (the race's winner tested against the nucleus).
  for (const sampling_params& sp : {at(0.7f), at(0.7f, 0, 0.6f)}) {
    std::vector<float> p(v);
    specdec::warp(logits, sp, p);
    specdec::coupled_workspace ws;
    std::vector<std::size_t> counts(v, 0);
    const int trials = 90000;
    for (int t = 0; t < trials; ++t)
      counts[static_cast<std::size_t>(specdec::coupled_sample(
          logits, sp, coupled_key(17, static_cast<std::size_t>(t)), ws))]++;
    const auto chi = specdec::test::chi_square(counts, std::vector<double>(p.begin(), p.end()));
    INFO("top-p " << sp.top_p << ": " << chi.describe());
    CHECK(chi.pass());
  }
}

TEST_CASE("coupled: plain decoding's law is the target's over 8 positions, and a control fails") {
  using namespace specdec::test::law;
  const std::size_t length = 8;
  const int trials = 12000;
  for (const sampling_params& sp :
       {at(1.0f), at(0.8f, 3, 0.9f), at(1.2f, 0, 1.0f, 0.2f), at(0.9f, 0, 0.8f)}) {
    auto o = options_of(sp, length);
    o.verification = verification_rule::coupled;
    table_model target(target_table);
    const auto got = sample_runs(
        [&](std::uint64_t s) {
          auto oo = o;
          oo.sampling.seed = s;
          return specdec::generate_autoregressive(target, prompt, oo);
        },
        length, trials, 100);
    INFO("T = " << sp.temperature << ", top-k " << sp.top_k << ", top-p " << sp.top_p
                << ", min-p " << sp.min_p);
    check_law(got, sp, 0);
  }
  // The control: the same noise at every position (the key ignores the position).
  const sampling_params sp = at(1.0f);
  const table_model model(target_table);
  specdec::coupled_workspace ws;
  window_counts windows(vocab, length, width);
  for (int t = 0; t < trials; ++t) {
    std::vector<token_id> seq(prompt.begin(), prompt.end());
    for (std::size_t j = 0; j < length; ++j) {
      std::vector<float> logits(vocab);
      model.next_logits(seq, logits);
      const coupled_key same_for_every_position(static_cast<std::uint64_t>(t), 0);
      seq.push_back(specdec::coupled_sample(logits, sp, same_for_every_position, ws));
    }
    windows.add(prompt, std::span<const token_id>(seq).subspan(prompt.size()));
  }
  const auto verdict = specdec::test::check_positions(windows, exact_laws(sp, prompt, length));
  INFO(verdict.describe());
  CHECK_FALSE(verdict.pass());
}

namespace {

const table_model_options big_target{.vocab_size = 24, .order = 3, .seed = 5, .scale = 2.5f};
const table_model_options big_draft{
    .vocab_size = 24, .order = 3, .seed = 5, .scale = 2.5f, .mix = 0.25f, .mix_seed = 9};
const std::vector<token_id> long_prompt{3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5};

// Plain decoding in coupled mode: the reference every speculative run must equal.
std::vector<token_id> plain(const generate_options& o) {
  table_model target(big_target);
  return specdec::generate_autoregressive(target, long_prompt, o).tokens;
}

generate_options coupled_options(const sampling_params& sp, std::uint64_t seed) {
  generate_options o;
  o.max_new_tokens = 48;
  o.sampling = sp;
  o.sampling.seed = seed;
  o.verification = verification_rule::coupled;
  return o;
}

const std::vector<sampling_params>& samplings() {
  static const std::vector<sampling_params> all{at(1.0f), at(0.8f, 8, 0.9f), at(0.9f, 0, 0.85f),
                                                at(0.0f)};
  return all;
}

}  // namespace

TEST_CASE("coupled: a draft model's chains and trees emit plain decoding's tokens") {
  for (const auto& sp : samplings()) {
    for (std::uint64_t seed = 0; seed < 6; ++seed) {
      const generate_options base = coupled_options(sp, seed);
      const auto want = plain(base);
      INFO("T = " << sp.temperature << ", seed " << seed);
      for (std::size_t k = 1; k <= 8; ++k) {
        table_model target(big_target), draft_model(big_draft);
        specdec::model_drafter drafter(draft_model);
        specdec::speculative_decoder decoder(target, drafter);
        auto o = base;
        o.draft_length = k;
        INFO("K = " << k);
        const auto r = decoder.generate(long_prompt, o);
        CHECK(r.tokens == want);
        CHECK(r.stats.accepted_tokens > 0);  // drafts were kept, not only the target's draws
      }
      for (const char* shape : {"2x2", "3x2x1", "4x1x1", "1x1x1x1"}) {
        for (const auto draw : {candidate_draw::iid, candidate_draw::without_replacement}) {
          specdec::test::tree_table_model target(big_target);
          table_model draft_model(big_draft);
          specdec::model_drafter drafter(draft_model);
          specdec::speculative_decoder decoder(target, drafter);
          auto o = base;
          o.tree = specdec::parse_branching(shape);
          o.tree_draw = draw;
          INFO("tree " << shape);
          CHECK(decoder.generate(long_prompt, o).tokens == want);
        }
      }
    }
  }
}

TEST_CASE("coupled: n-gram, composed and heads drafters emit plain decoding's tokens") {
  namespace law = specdec::test::law;  // the heads on hidden_table_model, V = 4
  for (const auto& sp : samplings()) {
    for (std::uint64_t seed = 0; seed < 4; ++seed) {
      const generate_options base = coupled_options(sp, seed);
      const auto want = plain(base);
      INFO("T = " << sp.temperature << ", seed " << seed);
      {
        table_model target(big_target);
        specdec::ngram_drafter lookup({.min_ngram = 1, .max_ngram = 3});
        specdec::speculative_decoder decoder(target, lookup);
        auto o = base;
        o.draft_length = 6;
        CHECK(decoder.generate(long_prompt, o).tokens == want);
        o.tree = {3, 1, 1};
        CHECK(decoder.generate(long_prompt, o).tokens == want);
      }
      {
        table_model target(big_target), draft_model(big_draft);
        specdec::ngram_drafter lookup({.min_ngram = 2, .max_ngram = 3});
        specdec::model_drafter fallback(draft_model);
        specdec::composed_drafter drafter(lookup, fallback);
        specdec::speculative_decoder decoder(target, drafter);
        auto o = base;
        o.draft_length = 5;
        CHECK(decoder.generate(long_prompt, o).tokens == want);
      }
    }
  }
  // The heads, on their own small hidden target (its plain coupled output as the reference).
  const std::vector<token_id> heads_prompt{1, 2, 3, 0, 1};
  for (const auto& sp : samplings()) {
    for (const auto kind : {law::head_kind::medusa, law::head_kind::eagle}) {
      for (std::uint64_t seed = 0; seed < 4; ++seed) {
        generate_options o = coupled_options(sp, seed);
        o.max_new_tokens = 30;
        table_model reference(law::target_table);
        const auto want = specdec::generate_autoregressive(reference, heads_prompt, o).tokens;
        law::with_heads(kind, specdec::head_candidates::sampled, [&](auto& drafter, auto& cap) {
          specdec::speculative_decoder decoder(cap, drafter);
          auto oo = o;
          oo.draft_length = 4;
          INFO((kind == law::head_kind::medusa ? "Medusa" : "EAGLE") << ", seed " << seed);
          CHECK(decoder.generate(heads_prompt, oo).tokens == want);
          oo.tree = {2, 2, 1};
          CHECK(decoder.generate(heads_prompt, oo).tokens == want);
        });
      }
    }
  }
}

TEST_CASE("coupled: the speed policy, a row processor and the batch decoder change no token") {
  specdec::step_cost_model cost;
  cost.target.assign(41, 0.0);
  for (std::size_t n = 1; n <= 40; ++n) cost.target[n] = 1.0 + 0.02 * static_cast<double>(n);
  cost.draft_per_level = 0.05;
  for (const auto& sp : samplings()) {
    for (std::uint64_t seed = 0; seed < 4; ++seed) {
      generate_options base = coupled_options(sp, seed);
      base.sampling.processor = specdec::penalties({.last_n = 8, .repeat = 1.3f});
      const auto want = plain(base);
      INFO("T = " << sp.temperature << ", seed " << seed);
      {  // the speed policy: chains and trees, K changing step by step
        table_model target(big_target), draft_model(big_draft);
        specdec::model_drafter drafter(draft_model);
        specdec::speculative_decoder decoder(target, drafter);
        auto o = base;
        o.policy = specdec::speed_policy(cost);
        CHECK(decoder.generate(long_prompt, o).tokens == want);
        CHECK(decoder.stats().drafted_tokens > 0);
      }
      {  // the batch decoder with the K policy, sequences joining and leaving
        specdec::test::batch_table_model model({.model = big_target});
        using drafter_t = specdec::model_drafter<table_model>;
        std::vector<std::unique_ptr<table_model>> drafts;
        std::vector<std::unique_ptr<drafter_t>> drafters;
        specdec::batch_options bo;
        bo.k_policy.target = cost.target;
        bo.k_policy.draft_per_token = 0.05;
        bo.k_policy.min_samples = 4;
        bo.k_policy.probe_every = 3;
        specdec::batch_decoder<specdec::test::batch_table_model, drafter_t> decoder(model, bo);
        const auto join = [&](std::size_t k) {
          drafts.push_back(std::make_unique<table_model>(big_draft));
          drafters.push_back(std::make_unique<drafter_t>(*drafts.back()));
          auto o = base;
          o.draft_length = k;
          return decoder.add(long_prompt, o, *drafters.back());
        };
        const auto first = join(3);
        decoder.step();
        decoder.step();
        const auto second = join(6);
        decoder.step();
        const auto third = join(1);
        decoder.remove(first);  // the first leaves mid-generation
        decoder.run();
        CHECK(decoder.result(second).tokens == want);
        CHECK(decoder.result(third).tokens == want);
      }
    }
  }
}

TEST_CASE("coupled: an exact draft is always accepted, and the coupling beats sample-and-match") {
  // A draft model equal to the target: every coupled draft is the target's own draw.
  for (const auto& sp : {at(1.0f), at(0.7f, 5, 0.95f)}) {
    table_model target(big_target), draft_model(big_target);
    specdec::model_drafter drafter(draft_model);
    specdec::speculative_decoder decoder(target, drafter);
    auto o = coupled_options(sp, 3);
    o.draft_length = 5;
    const auto r = decoder.generate(long_prompt, o);
    CHECK(r.stats.accepted_tokens == r.stats.drafted_tokens);
    o.tree = {3, 2};  // the first child of every node is the target's draw there
    const auto t = decoder.generate(long_prompt, o);
    CHECK(t.stats.accepted_tokens == t.stats.drafted_tokens);
  }
  // On fixed rows p and q, over fixed keys: P(race under p == race under q) against
  // sample-and-match's P(x ~ p equals argmax q) = p(argmax q).
  const std::vector<std::vector<float>> ps{{0.4f, 0.3f, 0.2f, 0.1f}, {0.25f, 0.25f, 0.25f, 0.25f},
                                           {0.7f, 0.1f, 0.1f, 0.1f}};
  const std::vector<std::vector<float>> qs{{0.3f, 0.4f, 0.2f, 0.1f}, {0.4f, 0.3f, 0.2f, 0.1f},
                                           {0.6f, 0.2f, 0.1f, 0.1f}};
  specdec::coupled_workspace ws;
  for (std::size_t i = 0; i < ps.size(); ++i) {
    std::size_t same = 0;
    const int trials = 20000;
    for (int t = 0; t < trials; ++t) {
      const coupled_key key(11, static_cast<std::size_t>(t));
      same += specdec::coupled_draw(ps[i], key, ws) == specdec::coupled_draw(qs[i], key, ws);
    }
    const auto top_q = static_cast<std::size_t>(
        std::max_element(qs[i].begin(), qs[i].end()) - qs[i].begin());
    const double coupled = static_cast<double>(same) / trials;
    const double match = ps[i][top_q];
    INFO("rows " << i << ": coupled " << coupled << ", sample-and-match " << match);
    CHECK(coupled >= match);
  }
}

TEST_CASE("coupled: the mode draws its own tokens, not the generator's") {
  std::size_t differ = 0;
  for (std::uint64_t seed = 0; seed < 8; ++seed) {
    const generate_options coupled = coupled_options(at(1.0f), seed);
    generate_options sequential = coupled;
    sequential.verification = verification_rule::token;
    differ += plain(coupled) != plain(sequential);
  }
  CHECK(differ >= 7);
}

TEST_CASE("sample-and-match: the target's law, and plain decoding's tokens with greedy drafts") {
  namespace law = specdec::test::law;
  for (const sampling_params& sp : {at(1.0f), at(0.8f, 3, 0.9f)}) {
    auto o = law::options_of(sp, 6);
    o.verification = verification_rule::sample_match;
    o.draft_length = 4;
    INFO("T = " << sp.temperature << ", top-k " << sp.top_k);
    law::check_law(law::run_model_drafter<table_model>(o, 12000, 500), sp, 4);
    o.tree = {2, 2};
    law::check_law(law::run_model_drafter<specdec::test::tree_table_model>(o, 12000, 900), sp, 2);
  }
  for (std::uint64_t seed = 0; seed < 6; ++seed) {
    generate_options o = coupled_options(at(0.9f), seed);
    o.verification = verification_rule::sample_match;
    const auto want = plain(o);
    for (const std::size_t k : {1u, 3u, 8u}) {
      table_model target(big_target), draft_model(big_draft);
      specdec::model_drafter drafter(draft_model);
      specdec::speculative_decoder decoder(target, drafter);
      auto oo = o;
      oo.draft_length = k;
      CHECK(decoder.generate(long_prompt, oo).tokens == want);
    }
  }
}
