#include <catch2/catch.hpp>
#include <specdec/tree/token_tree.hpp>

#include <cstdint>
#include <stdexcept>
#include <vector>

using specdec::token_id;
using specdec::token_tree;
using ids = std::vector<std::int32_t>;

namespace {
ids to_vector(auto range) { return ids(range.begin(), range.end()); }

// The mask built independently from the definition: j is i or reachable from i through parents.
bool brute_attends(const token_tree& t, std::int32_t i, std::int32_t j) {
  for (std::int32_t at = i; at >= 0; at = t.parent(static_cast<std::size_t>(at)))
    if (at == j) return true;
  return false;
}

void check_mask(const token_tree& t) {
  const auto mask = t.attention_mask();
  REQUIRE(mask.rows() == static_cast<Eigen::Index>(t.size()));
  REQUIRE(mask.cols() == static_cast<Eigen::Index>(t.size()));
  for (std::size_t i = 0; i < t.size(); ++i)
    for (std::size_t j = 0; j < t.size(); ++j) {
      const bool expected = brute_attends(t, static_cast<std::int32_t>(i), static_cast<std::int32_t>(j));
      CHECK(mask(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(j)) == expected);
      CHECK(t.attends(i, j) == expected);
    }
}
}  // namespace

TEST_CASE("token_tree: parse_branching") {
  CHECK(specdec::parse_branching("4x2x2") == std::vector<std::size_t>{4, 2, 2});
  CHECK(specdec::parse_branching("1") == std::vector<std::size_t>{1});
  CHECK(specdec::parse_branching("16x1") == std::vector<std::size_t>{16, 1});
  REQUIRE_THROWS_WITH(specdec::parse_branching(""),
                      "parse_branching: \"\": empty config (expected factors like 4x2x2)");
  REQUIRE_THROWS_WITH(specdec::parse_branching("4xx2"),
                      "parse_branching: \"4xx2\": empty factor at position 2");
  REQUIRE_THROWS_WITH(specdec::parse_branching("4x"),
                      "parse_branching: \"4x\": empty factor at position 2");
  REQUIRE_THROWS_WITH(specdec::parse_branching("4*2"),
                      "parse_branching: \"4*2\": '*' at position 1 is not a digit or 'x'");
  REQUIRE_THROWS_WITH(specdec::parse_branching("4x0"),
                      "parse_branching: \"4x0\": the second factor is 0; every factor must be >= 1");
  // Issue 10: "factor 2 must be >= 1" did not say which factor it meant.
  REQUIRE_THROWS_WITH(specdec::parse_branching("0x4"),
                      "parse_branching: \"0x4\": the first factor is 0; every factor must be >= 1");
  REQUIRE_THROWS_WITH(
      specdec::parse_branching("1x1x1x1x1x1x1x1x1x1x1x0"),
      "parse_branching: \"1x1x1x1x1x1x1x1x1x1x1x0\": the 12th factor is 0; every factor must be >= 1");
  REQUIRE_THROWS_WITH(specdec::parse_branching("1024x1024x2"),
                      "parse_branching: \"1024x1024x2\": the tree would exceed max_tree_nodes");
  REQUIRE_THROWS_WITH(specdec::parse_branching("99999999999999999999999"),
                      "parse_branching: \"99999999999999999999999\": the tree would exceed "
                      "max_tree_nodes");
}

TEST_CASE("token_tree: layouts of branching shapes") {
  SECTION("root only") {
    const token_tree t(7);
    CHECK(t.size() == 1);
    CHECK(t.max_depth() == 0);
    CHECK(t.token(0) == 7);
    CHECK(t.is_leaf(0));
    CHECK(t.leaves() == ids{0});
    CHECK(token_tree::from_branching(std::span<const std::size_t>{}, 7) == t);
  }
  SECTION("2x2") {
    const auto t = token_tree::from_branching("2x2");
    CHECK(t.size() == 7);
    CHECK(to_vector(t.parents()) == ids{-1, 0, 0, 1, 1, 2, 2});
    CHECK(to_vector(t.depths()) == ids{0, 1, 1, 2, 2, 2, 2});
    CHECK(to_vector(t.children(0)) == ids{1, 2});
    CHECK(to_vector(t.children(2)) == ids{5, 6});
    CHECK(t.children(4).empty());
    CHECK(t.leaves() == ids{3, 4, 5, 6});
    CHECK(to_vector(t.level(1)) == ids{1, 2});
    CHECK(to_vector(t.level(2)) == ids{3, 4, 5, 6});
    CHECK(t.level(3).empty());
    CHECK(t.path_to(5) == ids{0, 2, 5});
    CHECK(t.positions(10) == std::vector<std::size_t>{10, 11, 11, 12, 12, 12, 12});
    const auto mask = t.attention_mask();
    // Rows written out by hand: each node sees itself and its ancestors.
    const int expected[7][7] = {{1, 0, 0, 0, 0, 0, 0}, {1, 1, 0, 0, 0, 0, 0},
                                {1, 0, 1, 0, 0, 0, 0}, {1, 1, 0, 1, 0, 0, 0},
                                {1, 1, 0, 0, 1, 0, 0}, {1, 0, 1, 0, 0, 1, 0},
                                {1, 0, 1, 0, 0, 0, 1}};
    for (int i = 0; i < 7; ++i)
      for (int j = 0; j < 7; ++j) CHECK(mask(i, j) == (expected[i][j] == 1));
    check_mask(t);
  }
  SECTION("3x1x1") {
    const auto t = token_tree::from_branching("3x1x1");
    CHECK(t.size() == 10);
    CHECK(to_vector(t.parents()) == ids{-1, 0, 0, 0, 1, 2, 3, 4, 5, 6});
    CHECK(t.max_depth() == 3);
    CHECK(t.leaves() == ids{7, 8, 9});
    CHECK(t.path_to(8) == ids{0, 2, 5, 8});
    check_mask(t);
  }
  SECTION("4x2") {
    const auto t = token_tree::from_branching("4x2");
    CHECK(t.size() == 13);
    CHECK(to_vector(t.parents()) == ids{-1, 0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4});
    CHECK(to_vector(t.children(3)) == ids{9, 10});
    CHECK(t.leaves().size() == 8);
    check_mask(t);
  }
  SECTION("4x2x2") {
    const auto t = token_tree::from_branching("4x2x2", 42);
    CHECK(t.size() == 1 + 4 + 8 + 16);
    CHECK(t.leaves().size() == 16);
    CHECK(to_vector(t.level(3)).front() == 13);
    for (std::size_t i = 0; i < t.size(); ++i) CHECK(t.token(i) == 42);
    for (std::size_t i = 1; i < t.size(); ++i) {
      // children of a node are contiguous and its own parent appears among them
      const auto kids = t.children(static_cast<std::size_t>(t.parent(i)));
      CHECK(std::find(kids.begin(), kids.end(), static_cast<std::int32_t>(i)) != kids.end());
    }
    CHECK(t.path_to(28) == ids{0, 4, 12, 28});
    check_mask(t);
  }
}

TEST_CASE("token_tree: filling a shape with tokens") {
  auto t = token_tree::from_branching("2x1", 5);
  t.set_token(1, 10);
  t.set_token(2, 11);
  t.set_token(3, 12);
  t.set_token(4, 13);
  CHECK(t.path_tokens(4) == std::vector<token_id>{5, 11, 13});
  REQUIRE_THROWS_WITH(t.set_token(5, 1), "token_tree::set_token: node 5 outside the tree of 5 nodes");
  REQUIRE_THROWS_WITH(t.set_token(1, -3), "token_tree::set_token: token -3 is negative");
  REQUIRE_THROWS_WITH(t.path_to(9), "token_tree::path_to: node 9 outside the tree of 5 nodes");
}

TEST_CASE("token_tree: trie of candidates") {
  SECTION("shared prefixes merge, duplicates collapse, order is first appearance") {
    const std::vector<std::vector<token_id>> cands{{5, 6, 7}, {5, 6, 8}, {9}, {5, 6, 7}, {5, 1}, {}};
    const auto t = token_tree::from_candidates(3, cands);
    // root 3; depth 1: 5, 9; depth 2: 6, 1 (under 5); depth 3: 7, 8 (under 6)
    CHECK(to_vector(t.tokens()) == std::vector<token_id>{3, 5, 9, 6, 1, 7, 8});
    CHECK(to_vector(t.parents()) == ids{-1, 0, 0, 1, 1, 3, 3});
    CHECK(t.leaves() == ids{2, 4, 5, 6});
    CHECK(t.path_tokens(6) == std::vector<token_id>{3, 5, 6, 8});
    check_mask(t);
  }
  SECTION("each candidate is a root-to-node path") {
    const std::vector<std::vector<token_id>> cands{{1, 2, 3, 4}, {1, 2, 5}, {2, 2}, {1, 3}};
    const auto t = token_tree::from_candidates(0, cands);
    for (const auto& c : cands) {
      bool found = false;
      for (std::size_t i = 0; i < t.size(); ++i) {
        auto path = t.path_tokens(i);
        path.erase(path.begin());
        found |= path == c;
      }
      CHECK(found);
    }
    CHECK(t.size() == 1 + 4 + 2 + 1 + 1);  // 1,2,3,4 + 5 + 2,2 + 3
  }
  SECTION("no candidates: the root alone") {
    const auto t = token_tree::from_candidates(4, {});
    CHECK(t.size() == 1);
  }
  SECTION("negative token") {
    const std::vector<std::vector<token_id>> cands{{1, 2}, {1, -1}};
    REQUIRE_THROWS_WITH(token_tree::from_candidates(0, cands),
                        "token_tree::from_candidates: candidates[1][1] = -1 is negative");
  }
}

TEST_CASE("token_tree: trie of candidates within a shape") {
  const std::vector<std::vector<token_id>> cands{{5, 6, 7}, {5, 6, 8}, {9, 1}, {5, 2}, {4}};
  SECTION("a node keeps the first branching[d] children; deeper tokens are cut") {
    const std::vector<std::size_t> shape{2, 1};
    const auto t = token_tree::from_candidates(3, cands, shape);
    // root 3: 5, 9 (4 is a third child); 5: 6 (2 is a second); 9: 1; depth 3 is cut.
    CHECK(to_vector(t.tokens()) == std::vector<token_id>{3, 5, 9, 6, 1});
    CHECK(to_vector(t.parents()) == ids{-1, 0, 0, 1, 2});
  }
  SECTION("a shape wide enough keeps the whole trie") {
    const std::vector<std::size_t> shape{3, 2, 2};
    CHECK(token_tree::from_candidates(3, cands, shape) == token_tree::from_candidates(3, cands));
  }
  SECTION("an empty shape: the root alone") {
    CHECK(token_tree::from_candidates(3, cands, std::span<const std::size_t>()).size() == 1);
  }
}

TEST_CASE("token_tree: rebuilt in place, the same trees as the constructors") {
  const std::vector<std::vector<token_id>> cands{{5, 6, 7}, {5, 6, 8}, {9, 1}, {5, 2}, {4}};
  specdec::trie_workspace ws;
  token_tree t(1);
  SECTION("assign_candidates equals from_candidates within every shape, reused") {
    for (const auto& shape : std::vector<std::vector<std::size_t>>{
             {2, 1}, {3, 2, 2}, {1}, {3, 1, 1}, {2, 2}, {}}) {
      t.assign_candidates(3, cands, shape, ws);
      CHECK(t == token_tree::from_candidates(3, cands, shape));
      CHECK(to_vector(t.depths()) == to_vector(token_tree::from_candidates(3, cands, shape).depths()));
    }
  }
  SECTION("assign and reset equal the constructors, and an invalid tree leaves it as it was") {
    const std::vector<token_id> tokens{4, 7, 8, 9};
    const ids parents{-1, 0, 0, 1};
    t.assign(tokens, parents);
    CHECK(t == token_tree(tokens, parents));
    CHECK(t.num_children(0) == 2);
    CHECK(t.level(2).size() == 1);
    const ids bad{-1, 0, 2, 1};
    CHECK_THROWS_AS(t.assign(tokens, bad), std::invalid_argument);
    CHECK(t == token_tree(tokens, parents));
    t.reset(6);
    CHECK(t == token_tree(6));
    CHECK(t.max_depth() == 0);
    CHECK(t.is_leaf(0));
  }
}

TEST_CASE("token_tree: node counts of shapes never overflow") {
  using shape = std::vector<std::size_t>;
  const std::size_t big = std::size_t{1} << 32;
  CHECK(specdec::shape_nodes(shape{}) == 0);
  CHECK(specdec::shape_nodes(shape{4, 2, 2}) == 4 + 8 + 16);
  CHECK(specdec::shape_nodes(shape{big, big - 1}) == SIZE_MAX);  // 2^64: saturated, not 0
  CHECK(specdec::shape_nodes(shape{65536, 65536, 65536}) == 65536 + big + (big << 16));
  CHECK(specdec::shape_nodes(shape{65536, 65536, 65536, 65536, 65536}) == SIZE_MAX);
  CHECK(specdec::shape_nodes(shape{65536, 65536, 65536}, 1000) == 1000);
  CHECK(specdec::shape_nodes(shape{3, 0, 5}) == 3);
  CHECK_NOTHROW(specdec::check_tree_shape(shape{1023, 1024}, "tree"));  // 1 + 1023 x 1025 nodes
  REQUIRE_THROWS_WITH(specdec::check_tree_shape(shape{1024, 1024}, "tree"),
                      "tree: the shape 1024x1024 has more nodes than max_tree_nodes = 1048576");
  REQUIRE_THROWS_WITH(specdec::check_tree_shape(shape{big, big - 1}, "generate_options.tree"),
                      "generate_options.tree: the shape 4294967296x4294967295 has more nodes "
                      "than max_tree_nodes = 1048576");
  REQUIRE_THROWS_WITH(specdec::check_tree_shape(shape{2, 0}, "generate_options.tree"),
                      "generate_options.tree[1]: a branching factor must be >= 1");
  REQUIRE_THROWS_AS(token_tree::from_branching(shape{big, big - 1}), std::invalid_argument);
}

TEST_CASE("token_tree: flattened arrays are validated") {
  const std::vector<token_id> tokens{1, 2, 3, 4};
  CHECK(token_tree(tokens, ids{-1, 0, 0, 1}).size() == 4);
  REQUIRE_THROWS_WITH(token_tree(std::vector<token_id>{}, ids{}),
                      "token_tree: tokens is empty (need a root)");
  REQUIRE_THROWS_WITH(token_tree(tokens, ids{-1, 0, 0}),
                      "token_tree: parents.size() = 3 must equal tokens.size() = 4");
  REQUIRE_THROWS_WITH(token_tree(tokens, ids{0, 0, 0, 1}),
                      "token_tree: parents[0] must be -1 (root)");
  REQUIRE_THROWS_WITH(token_tree(tokens, ids{-1, 0, 3, 1}),
                      "token_tree: parents[2] = 3 must be in [0, 2)");
  REQUIRE_THROWS_WITH(token_tree(tokens, ids{-1, 0, -1, 1}),
                      "token_tree: parents[2] = -1 must be in [0, 2)");
  REQUIRE_THROWS_WITH(token_tree(tokens, ids{-1, 0, 1, 0}),
                      "token_tree: parents[3] = 0 < parents[2]: nodes must be in breadth-first "
                      "order");
  REQUIRE_THROWS_WITH(token_tree(std::vector<token_id>{1, -2}, ids{-1, 0}),
                      "token_tree: tokens[1] = -2 is negative");
  REQUIRE_THROWS_WITH(token_tree::from_branching(std::vector<std::size_t>{2, 0}),
                      "token_tree::from_branching: branching[1] must be >= 1");
  REQUIRE_THROWS_WITH(token_tree(tokens, ids{-1, 0, 0, 1}).positions(0, std::span<std::size_t>{}),
                      "token_tree::positions: out.size() = 0 must equal size() = 4");
}
