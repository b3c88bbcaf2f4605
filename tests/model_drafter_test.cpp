#include <catch2/catch.hpp>
#include <specdec/draft/model_drafter.hpp>

#include <string>
#include <vector>

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
