#include <catch2/catch.hpp>
#include <specdec/decoder.hpp>
#include <specdec/draft/model_drafter.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "support/chi_square.hpp"
#include "support/exact_joint.hpp"
#include "support/table_model.hpp"

using specdec::token_id;

TEST_CASE("model_drafter: top_tokens keeps the k largest, lowest ids first among ties") {
  const std::vector<float> row{0.5f, 2.0f, 1.0f, 2.0f, -1.0f, 1.0f, 3.0f};
  std::vector<token_id> out;
  specdec::detail::top_tokens(row, 3, out);
  CHECK(out == std::vector<token_id>{6, 1, 3});
  specdec::detail::top_tokens(row, 5, out);
  CHECK(out == std::vector<token_id>{6, 1, 3, 2, 5});
  specdec::detail::top_tokens(row, 1, out);
  CHECK(out == std::vector<token_id>{6});
  specdec::detail::top_tokens(row, 20, out);
  CHECK(out.size() == row.size());
  specdec::detail::top_tokens(row, 0, out);
  CHECK(out.empty());
}

TEST_CASE("model_drafter: trees have the requested shape and the history's last token as root") {
  specdec::test::table_model draft_model({.vocab_size = 9, .seed = 4});
  specdec::model_drafter drafter(draft_model);
  const std::vector<token_id> history{1, 2, 3};
  const std::vector<std::size_t> shape{3, 2};
  specdec::rng gen(1);
  specdec::tree_draft out;
  SECTION("greedy: top-k children, deterministic") {
    drafter.propose_tree(history, shape, {.temperature = 0.0f}, gen, specdec::candidate_draw::iid,
                         out);
    CHECK(out.draw == specdec::candidate_draw::deterministic);
    CHECK(out.q.rows() == 0);
    CHECK(out.tree.size() == 1 + 3 + 6);
  }
  SECTION("without replacement: distinct children with their q rows") {
    drafter.propose_tree(history, shape, {}, gen, specdec::candidate_draw::without_replacement,
                         out);
    CHECK(out.draw == specdec::candidate_draw::without_replacement);
    CHECK(out.q.rows() == static_cast<Eigen::Index>(out.tree.size()));
    CHECK(out.tree.size() == 1 + 3 + 6);
    for (std::size_t node = 0; node < 4; ++node) {
      std::vector<token_id> kids;
      for (auto c : out.tree.children(node)) kids.push_back(out.tree.token(static_cast<std::size_t>(c)));
      std::sort(kids.begin(), kids.end());
      CHECK(std::adjacent_find(kids.begin(), kids.end()) == kids.end());
    }
  }
  CHECK(out.tree.token(0) == 3);
  CHECK(draft_model.size() == history.size() - 1);  // the root is fed inside the tree only
}

TEST_CASE("model_drafter: model_calls counts every call on the draft model, trees path by path") {
  // table_model has no append_tree: each level of a tree is evaluated path by path, one append
  // per leaf.
  specdec::test::table_model draft_model({.vocab_size = 9, .seed = 4});
  specdec::model_drafter drafter(draft_model);
  const std::vector<token_id> history{1, 2, 3};
  const std::vector<std::size_t> shape{3, 2, 2};
  specdec::rng gen(1);
  specdec::tree_draft out;
  SECTION("greedy") {
    drafter.propose_tree(history, shape, {.temperature = 0.0f}, gen, specdec::candidate_draw::iid,
                         out);
  }
  SECTION("sampled") {
    drafter.propose_tree(history, shape, {}, gen, specdec::candidate_draw::iid, out);
  }
  SECTION("a chain, then a tree") {
    specdec::draft chain;
    drafter.propose(history, 4, {}, gen, chain);
    CHECK(drafter.model_calls() == draft_model.append_calls());
    const std::vector<token_id> longer{1, 2, 3, 5, 6};
    drafter.propose_tree(longer, shape, {}, gen, specdec::candidate_draw::without_replacement, out);
  }
  CHECK(draft_model.append_calls() > 3);
  CHECK(drafter.model_calls() == draft_model.append_calls());
}

TEST_CASE("model_drafter: a draft model used by someone else mid-sequence is an error") {
  using specdec::test::table_model;
  const specdec::test::table_model_options table{.vocab_size = 9, .seed = 4};
  table_model draft_model(table);
  specdec::model_drafter drafter(draft_model);
  const specdec::sampling_params greedy{.temperature = 0.0f};
  specdec::rng gen(1);
  specdec::draft out;
  // What a drafter that never saw anything else proposes.
  auto fresh = [&](const std::vector<token_id>& history) {
    table_model m(table);
    specdec::model_drafter d(m);
    specdec::draft r;
    d.propose(history, 3, greedy, gen, r);
    return r.tokens;
  };
  std::vector<token_id> history{1, 2, 3};
  drafter.propose(history, 3, greedy, gen, out);
  const std::size_t left = draft_model.size();

  SECTION("steps it skipped (inside composed_drafter) and a reset are re-synchronised") {
    history.insert(history.end(), {7, 7, 0, 5});
    drafter.propose(history, 3, greedy, gen, out);
    CHECK(out.tokens == fresh(history));
    drafter.reset();
    const std::vector<token_id> other{1, 2, 8, 8};
    drafter.propose(other, 3, greedy, gen, out);
    CHECK(out.tokens == fresh(other));
  }
  SECTION("another user's append is reported, the model is not emptied") {
    std::vector<float> rows(9);
    draft_model.append(std::vector<token_id>{4}, rows);
    history.push_back(2);
    REQUIRE_THROWS_WITH(drafter.propose(history, 3, greedy, gen, out),
                        "model_drafter: the draft model holds " + std::to_string(left + 1) +
                            " tokens, not the " + std::to_string(left) +
                            " this drafter left in it: something else used it (a draft model "
                            "needs a context of its own; after reset() the drafter takes it "
                            "over)");
    CHECK(draft_model.size() == left + 1);
    SECTION("after reset() the drafter takes the model over") {
      drafter.reset();
      drafter.propose(history, 3, greedy, gen, out);
      CHECK(out.tokens == fresh(history));
    }
  }
}

TEST_CASE("model_drafter: p_min is validated at construction, naming the field") {
  specdec::test::table_model m({.vocab_size = 5});
  using opts = specdec::model_drafter_options;
  CHECK_THROWS_WITH(specdec::model_drafter(m, opts{.p_min = -0.1f}),
                    Catch::StartsWith("model_drafter_options.p_min: must be in [0, 1], got -0.1"));
  CHECK_THROWS_WITH(specdec::model_drafter(m, opts{.p_min = 1.5f}),
                    Catch::StartsWith("model_drafter_options.p_min: must be in [0, 1], got 1.5"));
  CHECK_THROWS_AS(specdec::model_drafter(m, opts{.p_min = std::nanf("")}), std::invalid_argument);
  CHECK(specdec::model_drafter(m, opts{.p_min = 1.0f}).options().p_min == 1.0f);
  CHECK(specdec::model_drafter(m).options().p_min == 0.0f);
}

TEST_CASE("model_drafter: p_min stops the chain before the first position below it") {
  specdec::test::table_model free_model({.vocab_size = 7, .seed = 5, .scale = 1.5f});
  specdec::test::table_model stop_model({.vocab_size = 7, .seed = 5, .scale = 1.5f});
  const std::vector<token_id> history{1, 2, 3};
  const std::size_t k = 6;
  for (const float temperature : {0.0f, 0.8f}) {
    INFO("temperature " << temperature);
    const specdec::sampling_params sp{.temperature = temperature};
    // Each position's confidence, from an unstopped draft with the same generator.
    specdec::model_drafter free(free_model);
    specdec::rng g0(9);
    specdec::draft all;
    free.propose(history, k, sp, g0, all);
    REQUIRE(all.size() == k);
    std::vector<float> top(k);
    std::vector<token_id> context = history;
    for (std::size_t j = 0; j < k; ++j) {
      std::vector<float> row(7);
      free_model.next_logits(context, row);
      if (temperature == 0.0f) {
        const float m = *std::max_element(row.begin(), row.end());
        double sum = 0.0;
        for (float x : row) sum += std::exp(static_cast<double>(x - m));
        top[j] = static_cast<float>(1.0 / sum);
      } else {
        const auto q = all.q.row(static_cast<Eigen::Index>(j));
        top[j] = q.maxCoeff();
      }
      context.push_back(all.tokens[j]);
    }
    // A threshold between the lowest and the highest confidence seen stops at the first
    // position below it.
    const float lo = *std::min_element(top.begin(), top.end());
    const float hi = *std::max_element(top.begin(), top.end());
    REQUIRE(lo < hi);
    const float p_min = (lo + hi) / 2;
    std::size_t stop = 0;
    while (stop < k && top[stop] >= p_min) ++stop;
    specdec::model_drafter stopped(stop_model, {.p_min = p_min});
    specdec::rng g1(9);
    specdec::draft out;
    stopped.propose(history, k, sp, g1, out);
    CHECK(out.size() == stop);
    CHECK(std::equal(out.tokens.begin(), out.tokens.end(), all.tokens.begin()));
    if (temperature > 0.0f) CHECK(out.q.rows() == static_cast<Eigen::Index>(stop));
    {  // p_min = 1 drafts nothing (no position is certain here); p_min = 0 drafts k
      specdec::model_drafter none(stop_model, {.p_min = 1.0f});
      none.propose(history, k, sp, g1, out);
      CHECK(out.size() == 0);
      specdec::model_drafter off(stop_model, {.p_min = 0.0f});
      off.propose(history, k, sp, g1, out);
      CHECK(out.size() == k);
    }
  }
}

TEST_CASE("model_drafter: with p_min the decoder stays lossless") {
  using specdec::test::table_model;
  table_model target({.vocab_size = 5, .order = 3, .seed = 21, .scale = 1.5f});
  table_model draft_model({.vocab_size = 5, .order = 3, .seed = 21, .scale = 1.5f, .mix = 0.6f, .mix_seed = 4});
  specdec::model_drafter drafter(draft_model, {.p_min = 0.35f});
  specdec::speculative_decoder decoder(target, drafter);
  const std::vector<token_id> prompt{1, 2};
  SECTION("greedy: the plain output") {
    specdec::generate_options o;
    o.max_new_tokens = 60;
    o.draft_length = 4;
    o.sampling.temperature = 0.0f;
    const auto plain = specdec::generate_autoregressive(target, prompt, o);
    const auto r = decoder.generate(prompt, o);
    CHECK(r.tokens == plain.tokens);
    CHECK(r.stats.drafted_tokens < 4 * r.stats.target_calls);  // some chains stopped early
  }
  for (const auto verification : {specdec::verification_rule::token, specdec::verification_rule::block})
  DYNAMIC_SECTION("sampled, " << (verification == specdec::verification_rule::block ? "block" : "token")
                  << " verification: the target's joint distribution of three tokens") {
    specdec::sampling_params sp;
    sp.temperature = 0.9f;
    const auto expected = specdec::test::exact_joint(target, prompt, 3, sp);
    specdec::generate_options o;
    o.draft_length = 4;
    o.verification = verification;
    o.sampling = sp;
    const auto got = specdec::test::sample_first_three(decoder, prompt, o, 5, 40000, 77);
    const auto chi = specdec::test::chi_square(got.counts, expected);
    INFO(chi.describe());
    CHECK(chi.pass());
    CHECK(got.accepted > 0);
  }
}
