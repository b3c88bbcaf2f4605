#include <catch2/catch.hpp>
#include <specdec/draft/model_drafter.hpp>

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
