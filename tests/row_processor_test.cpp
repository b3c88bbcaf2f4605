// Row processors (sampling_params::processor): speculative decoding with a processor that is a
// deterministic function of the prefix emits tokens distributed exactly as plain decoding with
// the same processor, for every drafter, chains and trees; greedy output is identical.
//
// The processor under test joins the two kinds engines use. A grammar-like mask: an automaton
// whose state is the number of 3s read so far (mod 3, the whole prefix counts) forbids, after
// token `last`, the token (last + state + 1) mod 4. A repetition penalty: every distinct token of
// the last three is scaled away from likely (divided by 1.5 when positive, multiplied when not)
// and lowered by 0.4. The statistic is lossless_depth_test's: each generated position's window
// (x_{j-2}, x_{j-1}, x_j) against its exact law, enumerated over all 4^L continuations of the
// same context with the processor applied, chi-square at the 1e-4 level. Controls: runs without
// the processor fail the processed law, and runs with it fail the unprocessed one, so the
// statistic sees a processor the decoder left out.
#include <catch2/catch.hpp>
#include <cmath>
#include <deque>
#include <limits>
#include <memory>
#include <specdec/batch_decoder.hpp>
#include <specdec/decoder.hpp>
#include <specdec/draft/eagle_drafter.hpp>
#include <specdec/draft/hidden_capture.hpp>
#include <specdec/draft/medusa_drafter.hpp>
#include <specdec/draft/model_drafter.hpp>
#include <specdec/draft/ngram_drafter.hpp>
#include <specdec/math/penalties.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "support/batch_table_model.hpp"
#include "support/tree_table_model.hpp"
#include "support/window_law_runs.hpp"

namespace {

using namespace specdec::test::law;

// The grammar-like mask and the repetition penalty described above, as one processor.
void grammar_and_penalty(std::span<const token_id> prefix, std::span<float> logits) {
  std::size_t threes = 0;
  for (token_id t : prefix) threes += t == 3;
  const std::size_t window = std::min<std::size_t>(3, prefix.size());
  bool seen[vocab] = {};
  for (std::size_t i = prefix.size() - window; i < prefix.size(); ++i)
    seen[static_cast<std::size_t>(prefix[i])] = true;
  for (std::size_t t = 0; t < vocab; ++t)
    if (seen[t]) logits[t] = (logits[t] > 0 ? logits[t] / 1.5f : logits[t] * 1.5f) - 0.4f;
  if (!prefix.empty()) {
    const auto last = static_cast<std::size_t>(prefix.back());
    logits[(last + threes % 3 + 1) % vocab] = -std::numeric_limits<float>::infinity();
  }
}

// The token the mask forbids after `prefix`.
token_id forbidden_after(std::span<const token_id> prefix) {
  std::vector<float> row(vocab, 0.0f);
  grammar_and_penalty(prefix, row);
  for (std::size_t t = 0; t < vocab; ++t)
    if (std::isinf(row[t])) return static_cast<token_id>(t);
  return -1;
}

struct warping {
  std::string name;
  sampling_params sp;
};
std::vector<warping> warps(bool processed) {
  std::vector<warping> w{{"T = 1", {.temperature = 1.0f}},
                         {"T = 0.8, top-k 3, top-p 0.9",
                          {.temperature = 0.8f, .top_k = 3, .top_p = 0.9f}}};
  if (processed)
    for (auto& x : w) x.sp.processor = grammar_and_penalty;
  return w;
}

}  // namespace

TEST_CASE("row processor: model drafter chains (token-wise K = 4, 8 - block K = 4), trees") {
  const int trials = 8000;
  for (const auto& w : warps(true)) {
    SECTION(w.name + ", token-wise, K = 4 and 8") {
      for (std::size_t k : {4u, 8u}) {
        auto o = options_of(w.sp, k + 1);
        o.draft_length = k;
        check_law(run_model_drafter<table_model>(o, trials, 100 * k), w.sp, k);
      }
    }
    SECTION(w.name + ", block, K = 4") {
      auto o = options_of(w.sp, 5);
      o.draft_length = 4;
      o.verification = specdec::verification_rule::block;
      check_law(run_model_drafter<table_model>(o, trials, 500), w.sp, 4);
    }
    for (const auto draw : {candidate_draw::iid, candidate_draw::without_replacement}) {
      SECTION(w.name + (draw == candidate_draw::iid ? ", tree 2x2x2 i.i.d." : ", tree 2x2x2 w/o r.")) {
        auto o = options_of(w.sp, 4);
        o.tree = {2, 2, 2};
        o.tree_draw = draw;
        check_law(run_model_drafter<specdec::test::tree_table_model>(o, trials, 700), w.sp, 3);
      }
    }
    SECTION(w.name + ", tree 2x2x2 path by path") {
      auto o = options_of(w.sp, 4);
      o.tree = {2, 2, 2};
      o.tree_draw = candidate_draw::without_replacement;
      check_law(run_model_drafter<table_model>(o, trials, 900), w.sp, 3);
    }
  }
}

TEST_CASE("row processor: plain decoding follows the processed law") {
  for (const auto& w : warps(true)) {
    SECTION(w.name) {
      table_model target(target_table);
      check_law(sample_runs(
                    [&](std::uint64_t s) {
                      auto o = options_of(w.sp, 6);
                      o.sampling.seed = s;
                      return specdec::generate_autoregressive(target, prompt, o);
                    },
                    6, 8000, 1100),
                w.sp, 0);
    }
  }
}

TEST_CASE("row processor: control - the statistic sees a processor left out") {
  const int trials = 8000;
  auto processed = warps(true)[0].sp, bare = warps(false)[0].sp;
  auto o = options_of(processed, 5);
  o.draft_length = 4;
  SECTION("runs with the processor fail the unprocessed law") {
    const auto got = run_model_drafter<table_model>(o, trials, 1300);
    const auto verdict = specdec::test::check_positions(got.windows, exact_laws(bare, prompt, 5));
    INFO(verdict.describe());
    CHECK(verdict.worst_ratio() > 1.0);
  }
  SECTION("runs without it fail the processed law") {
    o.sampling = bare;
    const auto got = run_model_drafter<table_model>(o, trials, 1300);
    const auto verdict = specdec::test::check_positions(got.windows, exact_laws(processed, prompt, 5));
    INFO(verdict.describe());
    CHECK(verdict.worst_ratio() > 1.0);
  }
}

TEST_CASE("row processor: Medusa and EAGLE heads, chains of 8 and trees of depth 3") {
  const int trials = 8000;
  struct heads_case {
    std::string name;
    head_kind kind;
    std::vector<std::size_t> tree;
    candidate_draw draw;
    specdec::head_candidates candidates;
  };
  const auto sampled = specdec::head_candidates::sampled, top = specdec::head_candidates::top;
  const std::vector<heads_case> cases{
      {"Medusa chain of 8", head_kind::medusa, {}, candidate_draw::iid, sampled},
      {"Medusa tree 2x2x2 w/o r.", head_kind::medusa, {2, 2, 2}, candidate_draw::without_replacement,
       sampled},
      {"Medusa tree 2x2x2 top", head_kind::medusa, {2, 2, 2}, candidate_draw::iid, top},
      {"EAGLE chain of 8", head_kind::eagle, {}, candidate_draw::iid, sampled},
      {"EAGLE tree 2x2x2 i.i.d.", head_kind::eagle, {2, 2, 2}, candidate_draw::iid, sampled},
      {"EAGLE tree 2x2x2 top", head_kind::eagle, {2, 2, 2}, candidate_draw::iid, top},
  };
  const auto w = warps(true);
  for (std::size_t i = 0; i < cases.size(); ++i)
    for (std::size_t wi = 0; wi < w.size(); ++wi) {
      const heads_case& c = cases[i];
      SECTION(c.name + ", " + w[wi].name) {
        auto o = options_of(w[wi].sp, c.tree.empty() ? 9 : 4);
        o.draft_length = 8;
        o.tree = c.tree;
        o.tree_draw = c.draw;
        with_heads(c.kind, c.candidates, [&](auto& drafter, capture& cap) {
          specdec::speculative_decoder decoder(cap, drafter);
          check_law(run_decoder(decoder, o, trials, 2000 + 100 * i + 10 * wi), w[wi].sp,
                    c.tree.empty() ? 8 : 3);
        });
      }
    }
}

TEST_CASE("row processor: n-gram drafts (deterministic) and the batch decoder") {
  const auto w = warps(true);
  SECTION("n-gram lookup, chains of 4") {
    // A context {1, 2, g..., 1, 2}: the lookup drafts g, made (by a few rounds of fitting) the
    // processed greedy continuation of the context itself, so that all 4 drafts are kept often.
    std::vector<token_id> context;
    std::vector<token_id> g{0, 1, 0, 1, 0, 1};
    for (int round = 0; round < 4; ++round) {
      context = {1, 2};
      context.insert(context.end(), g.begin(), g.end());
      context.insert(context.end(), {1, 2});
      table_model target(target_table);
      g = specdec::generate_autoregressive(target, context,
                                           options_of({.temperature = 0.0f,
                                                       .processor = grammar_and_penalty},
                                                      6))
              .tokens;
    }
    for (const auto& x : w) {
      specdec::ngram_drafter lookup({.min_ngram = 1, .max_ngram = 2});
      table_model target(target_table);
      specdec::speculative_decoder decoder(target, lookup);
      auto o = options_of(x.sp, 5);
      o.draft_length = 4;
      check_law(run_decoder(decoder, o, 8000, 3000, context), x.sp, 4, context);
    }
  }
  SECTION("batch decoder, chains of 4 and trees 2x2x2") {
    using specdec::test::batch_table_model;
    for (const bool tree : {false, true})
      for (const auto& x : w) {
        batch_table_model model({.model = target_table});
        specdec::batch_decoder<batch_table_model, model_drafter_t> batch(model);
        std::deque<table_model> draft_models;
        std::deque<model_drafter_t> drafters;
        for (int i = 0; i < 16; ++i) drafters.emplace_back(draft_models.emplace_back(draft_table));
        auto o = options_of(x.sp, tree ? 4 : 5);
        o.draft_length = 4;
        if (tree) o.tree = {2, 2, 2};
        sampled got{window_counts(vocab, o.max_new_tokens, width), {}};
        const int trials = 8000;
        for (int done = 0; done < trials; done += 16) {
          std::vector<specdec::sequence_id> ids;
          for (int i = 0; i < 16; ++i) {
            auto oo = o;
            oo.sampling.seed = 4000 + static_cast<std::uint64_t>(done + i);
            ids.push_back(batch.add(prompt, oo, drafters[static_cast<std::size_t>(i)]));
          }
          batch.run();
          for (const auto id : ids) {
            if (batch.status(id) != specdec::sequence_status::finished) FAIL(batch.error(id));
            got.windows.add(prompt, batch.result(id).tokens);
            got.depth.add(batch.result(id).stats);
            batch.remove(id);
          }
        }
        check_law(got, x.sp, tree ? 3 : 4);
      }
  }
}

TEST_CASE("row processor: greedy speculative output equals plain greedy, every drafter") {
  sampling_params greedy{.temperature = 0.0f};
  greedy.processor = grammar_and_penalty;
  const std::vector<std::vector<token_id>> prompts{{1, 2}, {0}, {3, 3, 1}, {2, 0, 1, 2, 0, 1}};
  std::size_t changed = 0;  // prompts whose greedy output the processor changes
  for (const auto& p : prompts) {
    auto o = options_of(greedy, 24);
    table_model reference_target(target_table);
    const auto plain = specdec::generate_autoregressive(reference_target, p, o).tokens;
    REQUIRE(plain.size() == 24);
    // The processor matters (greedy without it differs, below) and its output obeys the mask.
    auto bare = o;
    bare.sampling.processor = nullptr;
    changed += specdec::generate_autoregressive(reference_target, p, bare).tokens != plain;
    std::vector<token_id> seq = p;
    for (token_id t : plain) {
      CHECK(t != forbidden_after(seq));
      seq.push_back(t);
    }
    for (const bool tree : {false, true}) {
      auto oo = o;
      oo.draft_length = 4;
      if (tree) oo.tree = {2, 2, 2};
      {
        specdec::test::tree_table_model target(target_table);
        table_model draft_model(draft_table);
        model_drafter_t drafter(draft_model);
        specdec::speculative_decoder decoder(target, drafter);
        CHECK(decoder.generate(p, oo).tokens == plain);
      }
      for (const auto kind : {head_kind::medusa, head_kind::eagle})
        with_heads(kind, specdec::head_candidates::top, [&](auto& drafter, capture& cap) {
          specdec::speculative_decoder decoder(cap, drafter);
          CHECK(decoder.generate(p, oo).tokens == plain);
        });
      if (!tree) {
        specdec::ngram_drafter lookup;
        table_model target(target_table);
        specdec::speculative_decoder decoder(target, lookup);
        CHECK(decoder.generate(p, oo).tokens == plain);
      }
    }
  }
  CHECK(changed >= 2);
}

TEST_CASE("row processor: drafters sample from processed rows") {
  // Every draft a drafter proposes obeys the mask, and its q row gives the forbidden token 0.
  sampling_params sp{.temperature = 1.0f};
  sp.processor = grammar_and_penalty;
  std::vector<token_id> history{1, 2, 3};
  specdec::rng gen(7);
  specdec::draft out;
  const auto check_draft = [&](const specdec::draft& d) {
    std::vector<token_id> seq = history;
    for (std::size_t j = 0; j < d.size(); ++j) {
      const token_id banned = forbidden_after(seq);
      CHECK(d.tokens[j] != banned);
      CHECK(d.q(static_cast<Eigen::Index>(j), banned) == 0.0f);
      seq.push_back(d.tokens[j]);
    }
  };
  for (int round = 0; round < 200; ++round) {
    table_model draft_model(draft_table);
    model_drafter_t drafter(draft_model);
    drafter.propose(history, 6, sp, gen, out);
    REQUIRE(out.size() == 6);
    check_draft(out);
    for (const auto kind : {head_kind::medusa, head_kind::eagle})
      with_heads(kind, specdec::head_candidates::sampled, [&](auto& d, capture& cap) {
        std::vector<float> rows((history.size() - 1) * vocab);
        cap.append(std::span<const token_id>(history).first(history.size() - 1), rows);
        d.propose(history, 6, sp, gen, out);
        REQUIRE(out.size() == 6);
        check_draft(out);
      });
  }
}

TEST_CASE("row processor: a throwing processor abandons the step, the decoder stays usable") {
  // Prompt lookup processes no rows of its own, so every call is on a row the target's verifier
  // reads (a drafter's own row that throws ends its draft instead: edges_test).
  table_model target(target_table);
  specdec::ngram_drafter drafter({.min_ngram = 1, .max_ngram = 3});
  specdec::speculative_decoder decoder(target, drafter);
  int calls = 0;
  sampling_params sp{.temperature = 0.0f};
  sp.processor = [&calls](std::span<const token_id> prefix, std::span<float> logits) {
    if (++calls == 10) throw std::runtime_error("processor failed");
    grammar_and_penalty(prefix, logits);
  };
  auto o = options_of(sp, 20);
  o.draft_length = 3;
  CHECK_THROWS_WITH(decoder.generate(prompt, o), "processor failed");
  CHECK(static_cast<std::size_t>(target.size()) + 1 == decoder.history().size());
  // The same request again (the processor no longer throws) gives plain greedy's tokens.
  table_model reference(target_table);
  sampling_params ref_sp{.temperature = 0.0f};
  ref_sp.processor = grammar_and_penalty;
  const auto plain = specdec::generate_autoregressive(reference, prompt, options_of(ref_sp, 20));
  CHECK(decoder.generate(prompt, o).tokens == plain.tokens);
}

TEST_CASE("row processor: penalties, the ready-made one") {
  SECTION("llama.cpp's rule on the last_n tokens, once per distinct token") {
    specdec::penalties p({.last_n = 4, .repeat = 2.0f, .frequency = 0.25f, .presence = 0.5f});
    std::vector<float> row{4.0f, -1.0f, 3.0f, 1.0f, -std::numeric_limits<float>::infinity()};
    const std::vector<token_id> prefix{2, 0, 1, 1, 4};  // window {0, 1, 1, 4}
    p(prefix, row);
    CHECK(row[0] == 4.0f / 2 - 0.25f - 0.5f);
    CHECK(row[1] == -1.0f * 2 - 2 * 0.25f - 0.5f);
    CHECK(row[2] == 3.0f);  // outside the window
    CHECK(row[3] == 1.0f);
    CHECK(std::isinf(row[4]));  // a masked token stays masked
  }
  SECTION("bad options and tokens name what is wrong") {
    CHECK_THROWS_WITH(specdec::penalties({.repeat = 0.0f}),
                      Catch::Contains("penalty_options.repeat"));
    CHECK_THROWS_WITH(specdec::penalties({.frequency = std::nanf("")}),
                      Catch::Contains("penalty_options.frequency"));
    specdec::penalties p({.repeat = 1.5f});
    std::vector<float> row(4);
    const std::vector<token_id> prefix{1, 9};
    CHECK_THROWS_AS(p(prefix, row), std::out_of_range);
  }
  SECTION("speculative greedy with it equals plain greedy with it") {
    sampling_params sp{.temperature = 0.0f};
    sp.processor = specdec::penalties({.last_n = 8, .repeat = 1.3f, .presence = 0.3f});
    auto o = options_of(sp, 30);
    table_model reference(target_table);
    const auto plain = specdec::generate_autoregressive(reference, prompt, o).tokens;
    table_model target(target_table), draft_model(draft_table);
    model_drafter_t drafter(draft_model);
    specdec::speculative_decoder decoder(target, drafter);
    o.draft_length = 5;
    CHECK(decoder.generate(prompt, o).tokens == plain);
  }
}
