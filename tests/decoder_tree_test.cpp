// The decoder with token trees (multi-candidate speculative decoding): lossless and greedy-exact,
// with tree attention (TreeLanguageModel) and through the path-by-path fallback.
#include <catch2/catch.hpp>
#include <specdec/decoder.hpp>
#include <specdec/draft/model_drafter.hpp>
#include <specdec/draft/ngram_drafter.hpp>

#include <string>
#include <vector>

#include "support/chi_square.hpp"
#include "support/exact_joint.hpp"
#include "support/table_model.hpp"
#include "support/tree_table_model.hpp"

namespace {

using specdec::candidate_draw;
using specdec::token_id;
using specdec::test::table_model;
using specdec::test::table_model_options;
using specdec::test::tree_table_model;

const std::vector<std::vector<std::size_t>> shapes = {{2, 2}, {3, 1, 1}, {4, 2}, {4, 2, 2}};

std::string name_of(const std::vector<std::size_t>& shape) {
  std::string s;
  for (std::size_t k : shape) s += (s.empty() ? "" : "x") + std::to_string(k);
  return s;
}

// Greedy tree decoding must equal greedy decoding, for every shape.
template <class Target, class DraftModel>
void check_greedy(Target& target, DraftModel& draft_model, const table_model& plain_target) {
  specdec::model_drafter drafter(draft_model);
  specdec::speculative_decoder decoder(target, drafter);
  const std::vector<token_id> prompt{4, 1, 7};
  specdec::generate_options o;
  o.max_new_tokens = 60;
  o.sampling.temperature = 0.0f;
  table_model reference = plain_target;
  const auto plain = specdec::generate_autoregressive(reference, prompt, o);
  for (const auto& shape : shapes) {
    o.tree = shape;
    const auto r = decoder.generate(prompt, o);
    INFO("tree " << name_of(shape));
    CHECK(r.tokens == plain.tokens);
    CHECK(r.stats.accepted_tokens > 0);
    CHECK(target.size() + 1 == decoder.history().size());
  }
}

// The joint law of the first three tokens must be the target's, exactly.
template <class Target>
void check_sampled(Target& target, const table_model& plain_target, candidate_draw draw,
                   const std::vector<std::size_t>& shape, int trials) {
  table_model draft_model({.vocab_size = 5, .order = 3, .seed = 21, .scale = 1.5f, .mix = 0.6f,
                           .mix_seed = 4});
  specdec::model_drafter drafter(draft_model);
  specdec::speculative_decoder decoder(target, drafter);
  const std::vector<token_id> prompt{1, 2};
  specdec::sampling_params sp;
  sp.temperature = 0.9f;
  sp.top_k = 4;
  sp.top_p = 0.95f;
  const auto expected = specdec::test::exact_joint(plain_target, prompt, 3, sp);
  specdec::generate_options o;
  o.tree = shape;
  o.tree_draw = draw;
  o.sampling = sp;
  const auto got = specdec::test::sample_first_three(decoder, prompt, o, 5, trials, 3);
  const auto chi = specdec::test::chi_square(got.counts, expected);
  INFO("tree " << name_of(shape) << ": " << chi.describe());
  CHECK(chi.pass());
  CHECK(got.accepted > 0);
}

}  // namespace

TEST_CASE("decoder trees: greedy tree decoding equals greedy decoding") {
  const table_model_options t{.vocab_size = 12, .order = 3, .seed = 8};
  const table_model_options d{.vocab_size = 12, .order = 3, .seed = 8, .mix = 0.5f, .mix_seed = 3};
  SECTION("tree attention") {
    tree_table_model target(t), draft_model(d);
    check_greedy(target, draft_model, table_model(t));
    CHECK(target.tree_calls() > 0);
  }
  SECTION("fallback: plain LanguageModels") {
    table_model target(t), draft_model(d);
    check_greedy(target, draft_model, table_model(t));
  }
}

TEST_CASE("decoder trees: sampled tree decoding keeps the target's joint distribution") {
  const table_model_options t{.vocab_size = 5, .order = 3, .seed = 21, .scale = 1.5f};
  const int trials = 30000;
  for (const auto draw : {candidate_draw::iid, candidate_draw::without_replacement}) {
    for (const auto& shape : {shapes[0], shapes[1], shapes[2]}) {
      const std::string name = std::string(draw == candidate_draw::iid ? "with" : "without") +
                               " replacement, " + name_of(shape);
      SECTION(name + ", tree attention") {
        tree_table_model target(t);
        check_sampled(target, table_model(t), draw, shape, trials);
      }
      SECTION(name + ", fallback") {
        table_model target(t);
        check_sampled(target, table_model(t), draw, shape, trials);
      }
    }
  }
}

TEST_CASE("decoder trees: n-gram candidate tries are lossless, greedy and sampled") {
  const table_model_options t{.vocab_size = 5, .order = 2, .seed = 5, .scale = 3.0f};
  tree_table_model target(t);
  specdec::ngram_drafter lookup({.min_ngram = 1, .max_ngram = 3});
  specdec::speculative_decoder decoder(target, lookup);
  const std::vector<token_id> prompt{1, 2, 3, 1, 2, 4, 1, 2, 3, 1, 2};
  specdec::generate_options o;
  o.tree = {3, 1, 1, 1};  // up to 3 candidates of 4 tokens
  SECTION("greedy") {
    o.max_new_tokens = 50;
    o.sampling.temperature = 0.0f;
    table_model reference(t);
    const auto plain = specdec::generate_autoregressive(reference, prompt, o);
    const auto r = decoder.generate(prompt, o);
    CHECK(r.tokens == plain.tokens);
    CHECK(r.stats.accepted_tokens > 0);
  }
  SECTION("sampled") {
    specdec::sampling_params sp;
    sp.temperature = 1.3f;
    const auto expected = specdec::test::exact_joint(table_model(t), prompt, 3, sp);
    o.sampling = sp;
    const auto got = specdec::test::sample_first_three(decoder, prompt, o, 5, 40000);
    const auto chi = specdec::test::chi_square(got.counts, expected);
    INFO(chi.describe());
    CHECK(chi.pass());
    CHECK(got.accepted > 1000);
  }
}

TEST_CASE("decoder trees: bad tree options are refused with the field named") {
  table_model target({.vocab_size = 6});
  specdec::no_drafter none;
  specdec::speculative_decoder plain(target, none);
  specdec::generate_options o;
  const std::vector<token_id> prompt{1};
  o.tree = {2, 2};
  REQUIRE_THROWS_WITH(plain.generate(prompt, o),
                      "generate_options.tree: this drafter cannot draft trees (it does not model "
                      "specdec::TreeDrafter)");
  table_model draft_model({.vocab_size = 6, .mix = 0.5f});
  specdec::model_drafter drafter(draft_model);
  specdec::speculative_decoder decoder(target, drafter);
  o.tree = {2, 0};
  REQUIRE_THROWS_WITH(decoder.generate(prompt, o),
                      "generate_options.tree[1]: a branching factor must be >= 1");
  o.tree = {2, 2};
  o.tree_draw = candidate_draw::deterministic;
  REQUIRE_THROWS_WITH(decoder.generate(prompt, o),
                      Catch::StartsWith("generate_options.tree_draw: must be iid"));
  o.tree_draw = candidate_draw::without_replacement;
  o.max_new_tokens = 20;
  CHECK(decoder.generate(prompt, o).tokens.size() == 20);
}
