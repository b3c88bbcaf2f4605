#include <catch2/catch.hpp>
#include <specdec/concepts/tree_language_model.hpp>
#include <specdec/tree/tree_fallback.hpp>

#include <cstdint>
#include <optional>
#include <span>
#include <stdexcept>
#include <vector>

#include "support/table_model.hpp"
#include "support/tree_table_model.hpp"

using specdec::token_id;
using specdec::token_tree;
using specdec::test::table_model;
using ids = std::vector<std::int32_t>;

namespace {

using specdec::test::tree_table_model;

static_assert(specdec::TreeLanguageModel<tree_table_model>);
static_assert(!specdec::TreeLanguageModel<table_model>);

token_tree sample_tree(const char* shape, std::size_t v, token_id root, std::uint64_t seed) {
  auto t = token_tree::from_branching(shape, root);
  for (std::size_t i = 1; i < t.size(); ++i)
    t.set_token(i, static_cast<token_id>((i * 7 + seed * 3) % v));
  return t;
}

}  // namespace

TEST_CASE("tree_fallback: path-by-path evaluation equals tree attention") {
  const specdec::test::table_model_options o{.vocab_size = 7, .order = 4, .seed = 5};
  const std::vector<token_id> prompt{1, 2, 3, 4};
  for (const char* shape : {"1", "2x2", "3x1x1", "4x2", "4x2x2"}) {
    INFO(shape);
    table_model plain(o);
    tree_table_model tree_model(o);
    std::vector<float> scratch(prompt.size() * 7);
    plain.append(std::span(prompt).first(3), std::span(scratch).first(3 * 7));
    tree_model.append(std::span(prompt).first(3), std::span(scratch).first(3 * 7));
    const auto tree = sample_tree(shape, 7, prompt[3], 1);
    std::vector<float> a(tree.size() * 7), b(tree.size() * 7);
    specdec::evaluate_tree(plain, tree, a);       // fallback
    specdec::evaluate_tree(tree_model, tree, b);  // the model's own append_tree
    CHECK(a == b);
    CHECK(plain.size() == 3);
    CHECK(tree_model.tree_calls() == 1);
    CHECK(plain.append_calls() == 1 + tree.leaves().size());
    // Depth first, each leaf's path shares its prefix with the last: every node fed once.
    CHECK(plain.appended_tokens() == 3 + tree.size());
    // Commit the path to the last leaf on both: the contexts agree and so does the next row.
    const auto path = tree.path_to(tree.size() - 1);
    specdec::commit_tree_path(plain, tree, path);
    specdec::commit_tree_path(tree_model, tree, path);
    CHECK(tree_model.commit_calls() == 1);
    REQUIRE(plain.size() == 3 + path.size());
    CHECK(std::vector<token_id>(plain.tokens().begin(), plain.tokens().end()) ==
          std::vector<token_id>(tree_model.tokens().begin(), tree_model.tokens().end()));
    std::vector<float> ra(7), rb(7);
    const std::vector<token_id> one{2};
    plain.append(one, ra);
    tree_model.append(one, rb);
    CHECK(ra == rb);
  }
}

TEST_CASE("tree_fallback: rows match a model fed each path from scratch") {
  const specdec::test::table_model_options o{.vocab_size = 6, .order = 3, .seed = 9};
  table_model m(o);
  std::vector<float> scratch(2 * 6);
  const std::vector<token_id> ctx{5, 0};
  m.append(ctx, scratch);
  const std::vector<std::vector<token_id>> cands{{2, 3, 4}, {2, 1}, {5}};
  const auto tree = token_tree::from_candidates(1, cands);
  std::vector<float> rows(tree.size() * 6);
  specdec::evaluate_tree(m, tree, rows);
  for (std::size_t node = 0; node < tree.size(); ++node) {
    table_model fresh(o);
    auto seq = ctx;
    const auto path = tree.path_tokens(node);
    seq.insert(seq.end(), path.begin(), path.end());
    std::vector<float> all(seq.size() * 6);
    fresh.append(seq, all);
    for (std::size_t t = 0; t < 6; ++t) CHECK(rows[node * 6 + t] == all[(seq.size() - 1) * 6 + t]);
  }
  // Leaves at different depths, where breadth-first leaf order would feed node 1 twice.
  const auto uneven = token_tree::from_candidates(1, std::vector<std::vector<token_id>>{{1, 2}, {3, 4}, {1, 5, 0}});
  std::vector<float> uneven_rows(uneven.size() * 6);
  const std::size_t fed = m.appended_tokens();
  specdec::evaluate_tree(m, uneven, uneven_rows);
  CHECK(m.appended_tokens() - fed == uneven.size());
  CHECK(m.size() == 2);
  SECTION("an empty path commits nothing") {
    specdec::commit_tree_path(m, tree, ids{});
    CHECK(m.size() == 2);
  }
  SECTION("the root alone") {
    specdec::commit_tree_path(m, tree, ids{0});
    CHECK(m.size() == 3);
    CHECK(m.tokens().back() == 1);
  }
}

TEST_CASE("tree_fallback: bad input throws and leaves the context") {
  const specdec::test::table_model_options o{.vocab_size = 4, .max_size = 6};
  table_model m(o);
  std::vector<float> scratch(3 * 4);
  m.append(std::vector<token_id>{0, 1, 2}, scratch);
  auto tree = token_tree::from_branching("2x1", 3);
  tree.set_token(1, 1);
  tree.set_token(2, 2);
  tree.set_token(3, 3);
  tree.set_token(4, 9);  // outside the vocabulary: the second path throws
  std::vector<float> rows(tree.size() * 4);
  CHECK_THROWS_AS(specdec::evaluate_tree(m, tree, rows), std::out_of_range);
  CHECK(m.size() == 3);
  std::vector<float> short_rows(3);
  REQUIRE_THROWS_WITH(specdec::evaluate_tree(m, tree, short_rows),
                      "evaluate_tree_by_paths: logits.size() = 3 must be tree.size() * "
                      "vocab_size() = 20");
  REQUIRE_THROWS_WITH(specdec::commit_tree_path(m, tree, ids{1}),
                      "commit_tree_path: path[0] = 1 is not the root");
  REQUIRE_THROWS_WITH(specdec::commit_tree_path(m, tree, ids{0, 3}),
                      "commit_tree_path: path[1] = 3 is not a child of path[0]");
  REQUIRE_THROWS_WITH(specdec::commit_tree_path(m, tree, ids{0, 7}),
                      "commit_tree_path: path[1] = 7 is not a node of the tree");
  CHECK(m.size() == 3);
  SECTION("capacity: a path that does not fit") {
    auto deep = token_tree::from_branching("1x1x1x1", 0);
    std::vector<float> deep_rows(deep.size() * 4);
    CHECK_THROWS_AS(specdec::evaluate_tree(m, deep, deep_rows), std::length_error);
    CHECK(m.size() == 3);
  }
  SECTION("the dispatch validates paths for tree models too") {
    tree_table_model tm(o);
    tm.append(std::vector<token_id>{0}, std::span(scratch).first(4));
    tree.set_token(4, 0);
    std::vector<float> r(tree.size() * 4);
    specdec::evaluate_tree(tm, tree, r);
    REQUIRE_THROWS_WITH(specdec::commit_tree_path(tm, tree, ids{0, 3}),
                        "commit_tree_path: path[1] = 3 is not a child of path[0]");
    specdec::commit_tree_path(tm, tree, ids{0, 2, 4});
    CHECK(tm.size() == 4);
  }
}
