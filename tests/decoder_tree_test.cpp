// The decoder with token trees (multi-candidate speculative decoding): lossless and greedy-exact,
// with tree attention (TreeLanguageModel) and through the path-by-path fallback.
#include <catch2/catch.hpp>
#include <specdec/decode/draft_phase.hpp>
#include <specdec/decoder.hpp>
#include <specdec/draft/model_drafter.hpp>
#include <specdec/draft/ngram_drafter.hpp>

#include <string>
#include <vector>

#include "support/cells_tree_model.hpp"
#include "support/chi_square.hpp"
#include "support/exact_joint.hpp"
#include "support/scripted_tree_drafter.hpp"
#include "support/table_model.hpp"
#include "support/tree_table_model.hpp"

namespace {

using specdec::candidate_draw;
using specdec::token_id;
using specdec::test::table_model;
using specdec::test::table_model_options;
using specdec::test::cells_tree_model;
using specdec::test::scripted_tree_drafter;
using specdec::test::tree_fault;
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
                      "generate_options.tree: this pipeline cannot run trees (the drafter does "
                      "not model specdec::TreeDrafter, or the batch model does not model "
                      "specdec::BatchTreeLanguageModel)");
  table_model draft_model({.vocab_size = 6, .mix = 0.5f});
  specdec::model_drafter drafter(draft_model);
  specdec::speculative_decoder decoder(target, drafter);
  o.tree = {2, 0};
  REQUIRE_THROWS_WITH(decoder.generate(prompt, o),
                      "generate_options.tree[1]: a branching factor must be >= 1");
  o.tree = {65536, 65536, 65536};  // 2^48 nodes: refused, not cut to the depth that fits
  REQUIRE_THROWS_WITH(decoder.generate(prompt, o),
                      "generate_options.tree: the shape 65536x65536x65536 has more nodes than "
                      "max_tree_nodes = " + std::to_string(specdec::max_tree_nodes));
  o.tree = {2, 2};
  o.tree_draw = candidate_draw::deterministic;
  REQUIRE_THROWS_WITH(decoder.generate(prompt, o),
                      Catch::StartsWith("generate_options.tree_draw: must be iid"));
  o.tree_draw = candidate_draw::without_replacement;
  o.max_new_tokens = 20;
  CHECK(decoder.generate(prompt, o).tokens.size() == 20);
}

TEST_CASE("decoder trees: a draft that breaks the TreeDrafter contract is refused before the target") {
  const table_model_options t{.vocab_size = 6, .order = 3, .seed = 8};
  tree_table_model target(t);
  scripted_tree_drafter drafter(6);
  specdec::speculative_decoder decoder(target, drafter);
  const std::vector<token_id> prompt{1, 2, 3};
  specdec::generate_options o;
  o.max_new_tokens = 20;
  o.tree = {2, 2};
  o.sampling.temperature = 0.9f;
  const auto refused = [&](tree_fault fault, bool deterministic, const auto& message) {
    drafter.fault = fault;
    drafter.deterministic = deterministic;
    decoder.start(prompt, o);
    const std::size_t held = target.size();
    REQUIRE_THROWS_WITH(decoder.step(), message);
    CHECK(target.size() == held);
    CHECK(target.tree_calls() == 0);
    CHECK(drafter.tree_calls == 1);
    // The decoder is still usable: an honest drafter decodes as the target alone would.
    drafter.fault = tree_fault::none;
    specdec::generate_options greedy = o;
    greedy.sampling.temperature = 0.0f;
    table_model reference(t);
    const auto plain = specdec::generate_autoregressive(reference, prompt, greedy);
    const auto r = decoder.generate(prompt, greedy);
    CHECK(r.tokens == plain.tokens);
    CHECK(target.tree_calls() > 0);
  };
  SECTION("q with V - 1 columns") {
    refused(tree_fault::q_short_columns, false,
            "drafter: a sampled tree's q must be tree.size() x vocab_size = 7 x 6, is 7 x 5");
  }
  SECTION("q with too few rows") {
    refused(tree_fault::q_short_rows, false,
            "drafter: a sampled tree's q must be tree.size() x vocab_size = 7 x 6, is 6 x 6");
  }
  SECTION("a deterministic draw with q rows") {
    refused(tree_fault::deterministic_with_rows, true,
            "drafter: a deterministic tree must have no q rows, has 7");
  }
  SECTION("a draw that is not a candidate_draw") {
    refused(tree_fault::bad_draw, false,
            "drafter: the tree's draw is not iid, without_replacement or deterministic");
  }
  SECTION("a root that is not the last token") {
    refused(tree_fault::wrong_root, false,
            "drafter: the tree's root must be the last history token");
  }
  SECTION("deeper than asked") {
    refused(tree_fault::too_deep, false, "drafter: the tree is deeper than requested");
  }
  SECTION("more children than the branching allows") {
    refused(tree_fault::too_wide, false,
            "drafter: tree node 0 at depth 0 has 3 children, more than branching[0] = 2");
  }
  SECTION("equal siblings drawn without replacement") {
    refused(tree_fault::duplicate_siblings, false,
            "drafter: tree nodes 1 and 2 are siblings with the same token 0, which "
            "without_replacement cannot draw");
  }
  SECTION("a sampled child its parent's q row cannot give") {
    refused(tree_fault::zero_q_child, false,
            Catch::StartsWith("drafter: tree node 1 proposes token ") &&
                Catch::EndsWith(", which its parent's q row (node 0) gives probability 0: a "
                                "candidate must be drawn from that row"));
  }
}

TEST_CASE("decoder: a sampled chain's q of the wrong shape is refused before the target") {
  const table_model_options t{.vocab_size = 6, .order = 3, .seed = 8};
  tree_table_model target(t);
  scripted_tree_drafter drafter(6);
  specdec::speculative_decoder decoder(target, drafter);
  const std::vector<token_id> prompt{1, 2, 3};
  specdec::generate_options o;
  o.draft_length = 3;
  o.sampling.temperature = 0.9f;
  const auto untouched = [&] {
    CHECK(target.size() == prompt.size() - 1);
    CHECK(target.append_calls() == 1);  // the prompt's
  };
  SECTION("V - 1 columns") {
    drafter.fault = tree_fault::chain_q_short_columns;
    decoder.start(prompt, o);
    REQUIRE_THROWS_WITH(decoder.step(),
                        "drafter: q must have one row of vocab_size = 6 per draft token (3), is "
                        "3 x 5");
    untouched();
  }
  SECTION("a row too few") {
    drafter.fault = tree_fault::chain_q_short_rows;
    decoder.start(prompt, o);
    REQUIRE_THROWS_WITH(decoder.step(),
                        "drafter: q must have one row of vocab_size = 6 per draft token (3), is "
                        "2 x 6");
    untouched();
  }
}

TEST_CASE("decoder trees: near a full context the tree's nodes, not only its depth, fit the room") {
  // 2x2x2 is 15 nodes; a model of 24 cells (each pending node takes one) runs out of room for
  // it while there is still room for its depth.
  const table_model_options t{.vocab_size = 8, .order = 3, .seed = 8, .max_size = 24};
  const table_model_options d{.vocab_size = 8, .order = 3, .seed = 8, .mix = 0.4f, .mix_seed = 3};
  const std::vector<token_id> prompt{4, 1, 7, 2, 5, 3};
  specdec::generate_options o;
  o.max_new_tokens = 100;
  o.sampling.temperature = 0.0f;
  table_model reference(t);
  const auto plain = specdec::generate_autoregressive(reference, prompt, o);
  REQUIRE(plain.reason == specdec::stop_reason::context_full);
  o.tree = {2, 2, 2};
  SECTION("model drafter") {
    cells_tree_model target(t);
    table_model draft_model(d);
    specdec::model_drafter drafter(draft_model);
    specdec::speculative_decoder decoder(target, drafter);
    specdec::generate_result r;
    REQUIRE_NOTHROW(r = decoder.generate(prompt, o));
    CHECK(r.reason == specdec::stop_reason::context_full);
    CHECK(r.tokens == plain.tokens);
    CHECK(target.tree_calls() > 0);
  }
  SECTION("a drafter that always drafts the full shape") {
    cells_tree_model target(t);
    scripted_tree_drafter drafter(8);
    drafter.deterministic = true;
    specdec::speculative_decoder decoder(target, drafter);
    specdec::generate_result r;
    REQUIRE_NOTHROW(r = decoder.generate(prompt, o));
    CHECK(r.reason == specdec::stop_reason::context_full);
    CHECK(r.tokens == plain.tokens);
  }
}

TEST_CASE("decoder trees: the draft phase asks for no tree beyond max_tree_nodes or the room") {
  // The draft phase on its own (the options' check may refuse such a shape before it runs).
  scripted_tree_drafter drafter(6);
  drafter.deterministic = true;
  specdec::sequence_state s;
  s.vocab = 6;
  s.options.max_new_tokens = 100;
  s.history = {1, 2, 3};
  s.prompt_size = 3;
  s.done = false;
  s.can_tree = true;  // start_sequence sets it from the pipeline
  // Each draft_phase below is a probe of its own: the step it drafts is dropped (no model was
  // scored), so the sequence expects a draft again.
  const auto draft = [&](std::size_t max_k = SIZE_MAX, std::size_t max_rows = SIZE_MAX) {
    s.expects = specdec::step_phase::draft;
    specdec::draft_phase(s, drafter, max_k, max_rows);
  };
  SECTION("1024 + 1024^2 nodes pass max_tree_nodes: one level") {
    s.options.tree = {1024, 1024, 2};
    draft();
    CHECK(drafter.last_branching == std::vector<std::size_t>{1024});
    CHECK(s.tree.tree.size() == 1025);
    CHECK(s.score_tokens().size() == 1025);
  }
  SECTION("a shape whose node count wraps a size_t: one level") {
    const std::size_t big = std::size_t{1} << 32;
    s.options.tree = {2, big, big - 1};
    draft();
    CHECK(drafter.last_branching == std::vector<std::size_t>{2});
  }
  SECTION("a factor of 0 (the options' check refuses it) ends the shape") {
    s.options.tree = {2, 0, 2};
    draft();
    CHECK(drafter.last_branching == std::vector<std::size_t>{2});
  }
  SECTION("no rows to spare: no drafts, tree or chain") {
    s.options.tree = {2, 2};
    for (const std::size_t rows : {0, 1}) {
      draft(SIZE_MAX, rows);
      CHECK(drafter.tree_calls == 0);
      CHECK(s.score_tokens().size() == 1);
    }
    s.options.tree.clear();
    for (const std::size_t rows : {0, 1}) {
      draft(SIZE_MAX, rows);
      CHECK(s.score_tokens().size() == 1);
    }
  }
  SECTION("the room after the context bounds the nodes, not only the depth") {
    s.options.tree = {2, 2, 2};
    s.capacity = 2 + 6;  // the model holds 2 tokens; 6 cells are left for the tree
    draft();
    CHECK(drafter.last_branching == std::vector<std::size_t>{2});  // 1 + 2 + 4 nodes do not fit
    CHECK(s.tree.tree.size() == 3);
    s.capacity = 2 + 7;
    draft();
    CHECK(drafter.last_branching == std::vector<std::size_t>{2, 2});
    CHECK(s.tree.tree.size() == 7);
    s.capacity = 2 + 2;  // the root and the token emitted after it: nothing to draft
    const std::size_t calls = drafter.tree_calls;
    draft();
    CHECK(drafter.tree_calls == calls);
    CHECK(s.tree.tree.size() == 1);
  }
}
