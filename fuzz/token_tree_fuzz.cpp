// fuzz/token_tree_fuzz.cpp - token trees (specdec/tree/token_tree.hpp) and their evaluation and
// commit (specdec/tree/tree_fallback.hpp, and the llama2c engine's tree attention). The first
// byte picks how the tree is made: raw (tokens, parents) arrays, which may be invalid;
// from_branching with small factors; or from_candidates with random continuations.
// Properties checked on every input:
//   1. token_tree(tokens, parents) accepts exactly the arrays an independent check calls valid
//      (non-empty, equal sizes, tokens >= 0, parents[0] == -1, parents[i] in [0, i) and
//      non-decreasing): std::invalid_argument otherwise;
//   2. depths, children, leaves, levels, path_to, path_tokens, positions, attends and the dense
//      attention mask agree with a walk up the parent links;
//   3. from_candidates holds every candidate as a root path and has one node per distinct
//      prefix; from_branching has the product-sum node count;
//   4. evaluate_tree gives the same rows by tree attention (tree_table_model) as by paths
//      (table_model), and the llama2c engine's tree attention matches each path evaluated alone
//      within 1e-4; commit_tree_path of a random chain leaves every model as if the path had
//      been appended, and a broken path throws std::invalid_argument with the tree still
//      pending and the context unchanged.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <llama2c/tools/checkpoint_writer.hpp>
#include <llama2c/engine/model.hpp>
#include <memory>
#include <optional>
#include <set>
#include <specdec/math/rng.hpp>
#include <specdec/tree/token_tree.hpp>
#include <specdec/tree/tree_fallback.hpp>
#include <stdexcept>
#include <support/table_model.hpp>
#include <support/tree_table_model.hpp>
#include <vector>

#include "fuzz_input.hpp"

namespace {

using specdec::token_id;
using specdec::token_tree;
using specdec::fuzz::input;
namespace l2 = specdec::llama2c;
constexpr std::size_t vocab = 12;

// A tiny random llama2.c checkpoint, written once per process.
const std::shared_ptr<const l2::weights>& tiny_weights() {
  static const std::shared_ptr<const l2::weights> w = [] {
    l2::config c;
    c.dim = 8;
    c.hidden_dim = 12;
    c.n_layers = 2;
    c.n_heads = 2;
    c.n_kv_heads = 1;
    c.vocab_size = vocab;
    c.seq_len = 64;
    const auto& p = specdec::fuzz::scratch_file("tree_checkpoint");
    specdec::rng g(3);
    l2::write_checkpoint(p, c, [&](l2::tensor_kind, std::size_t, std::span<float> out) {
      for (float& x : out) x = static_cast<float>(g.uniform_open() - 0.5);
    });
    auto loaded = l2::load_checkpoint(p);
    std::filesystem::remove(p);
    return loaded;
  }();
  return w;
}

bool valid_arrays(const std::vector<token_id>& t, const std::vector<std::int32_t>& p) {
  if (t.empty() || t.size() != p.size() || p[0] != -1) return false;
  for (std::size_t i = 0; i < t.size(); ++i) {
    if (t[i] < 0) return false;
    if (i == 0) continue;
    if (p[i] < 0 || static_cast<std::size_t>(p[i]) >= i) return false;
    if (i >= 2 && p[i] < p[i - 1]) return false;
  }
  return true;
}

void check_structure(const token_tree& tree) {
  const std::size_t n = tree.size();
  std::vector<std::int32_t> depth(n);
  std::size_t deepest = 0;
  for (std::size_t i = 0; i < n; ++i) {
    std::int32_t d = 0;
    for (std::int32_t a = tree.parent(i); a >= 0; a = tree.parent(static_cast<std::size_t>(a))) ++d;
    depth[i] = d;
    deepest = std::max(deepest, static_cast<std::size_t>(d));
    SPECDEC_FUZZ_CHECK(tree.depth(i) == d, "depth");
  }
  SPECDEC_FUZZ_CHECK(tree.max_depth() == deepest, "max_depth");
  std::vector<std::int32_t> leaves;
  for (std::size_t i = 0; i < n; ++i) {
    std::vector<std::int32_t> kids;
    for (std::size_t j = 0; j < n; ++j)
      if (tree.parent(j) == static_cast<std::int32_t>(i))
        kids.push_back(static_cast<std::int32_t>(j));
    const auto range = tree.children(i);
    SPECDEC_FUZZ_CHECK(std::vector<std::int32_t>(range.begin(), range.end()) == kids, "children");
    SPECDEC_FUZZ_CHECK(tree.is_leaf(i) == kids.empty(), "is_leaf");
    if (kids.empty()) leaves.push_back(static_cast<std::int32_t>(i));
  }
  SPECDEC_FUZZ_CHECK(tree.leaves() == leaves, "leaves");
  for (std::size_t d = 0; d <= deepest + 1; ++d) {
    std::vector<std::int32_t> at;
    for (std::size_t i = 0; i < n; ++i)
      if (static_cast<std::size_t>(depth[i]) == d) at.push_back(static_cast<std::int32_t>(i));
    const auto range = tree.level(d);
    SPECDEC_FUZZ_CHECK(std::vector<std::int32_t>(range.begin(), range.end()) == at, "level");
  }
  const auto mask = tree.attention_mask();
  const auto pos = tree.positions(5);
  for (std::size_t i = 0; i < n; ++i) {
    std::vector<std::int32_t> up;
    for (auto a = static_cast<std::int32_t>(i); a >= 0;
         a = tree.parent(static_cast<std::size_t>(a)))
      up.insert(up.begin(), a);
    SPECDEC_FUZZ_CHECK(tree.path_to(i) == up, "path_to");
    std::vector<token_id> toks;
    for (const auto a : up) toks.push_back(tree.token(static_cast<std::size_t>(a)));
    SPECDEC_FUZZ_CHECK(tree.path_tokens(i) == toks, "path_tokens");
    SPECDEC_FUZZ_CHECK(pos[i] == 5 + static_cast<std::size_t>(depth[i]), "positions");
    for (std::size_t j = 0; j < n; ++j) {
      const bool anc = std::find(up.begin(), up.end(), static_cast<std::int32_t>(j)) != up.end();
      SPECDEC_FUZZ_CHECK(tree.attends(i, j) == anc, "attends");
      SPECDEC_FUZZ_CHECK(mask(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(j)) == anc,
                         "attention_mask");
    }
  }
}

// A root-to-node chain, or (when `broken`) a path that is not one.
std::vector<std::int32_t> pick_path(const token_tree& tree, input& in, bool broken) {
  std::vector<std::int32_t> path = tree.path_to(in.below(tree.size()));
  if (in.byte() % 2) path.resize(in.below(path.size() + 1));  // a prefix is a chain too
  if (broken) {
    if (path.empty() || in.byte() % 2) {
      path.push_back(static_cast<std::int32_t>(tree.size() + in.below(3)));  // not a node
    } else {
      path[in.below(path.size())] = static_cast<std::int32_t>(in.below(tree.size() + 2)) - 1;
    }
  }
  return path;
}

bool is_chain(const token_tree& tree, const std::vector<std::int32_t>& path) {
  for (std::size_t k = 0; k < path.size(); ++k) {
    if (path[k] < 0 || static_cast<std::size_t>(path[k]) >= tree.size()) return false;
    if (tree.parent(static_cast<std::size_t>(path[k])) != (k == 0 ? -1 : path[k - 1])) return false;
  }
  return true;
}

void check_models(const token_tree& tree, input& in) {
  const std::size_t n = tree.size();
  std::vector<token_id> context{1, 4, 7};
  for (std::size_t i = in.below(4); i > 0; --i)
    context.push_back(static_cast<token_id>(in.below(vocab)));
  std::vector<float> scratch(context.size() * vocab);

  specdec::test::table_model plain({.vocab_size = vocab});
  specdec::test::tree_table_model treed({.vocab_size = vocab});
  l2::model engine(tiny_weights(), {.threads = 1});
  plain.append(context, scratch);
  treed.append(context, scratch);
  engine.append(context, scratch);

  std::vector<float> a(n * vocab), b(n * vocab), c(n * vocab);
  specdec::evaluate_tree(plain, tree, a);
  specdec::evaluate_tree(treed, tree, b);
  SPECDEC_FUZZ_CHECK(a == b, "tree attention and paths differ on the table model");
  specdec::evaluate_tree(engine, tree, c);
  for (std::size_t node = 0; node < n; ++node) {
    l2::model alone(tiny_weights(), {.threads = 1});
    std::vector<token_id> all = context;
    const auto p = tree.path_tokens(node);
    all.insert(all.end(), p.begin(), p.end());
    std::vector<float> rows(all.size() * vocab);
    alone.append(all, rows);
    for (std::size_t t = 0; t < vocab; ++t)
      SPECDEC_FUZZ_CHECK(
          std::fabs(rows[(all.size() - 1) * vocab + t] - c[node * vocab + t]) < 1e-4f,
          "engine tree row differs from its path alone");
  }

  const bool broken = in.byte() % 4 == 0;
  const auto path = pick_path(tree, in, broken);
  if (!is_chain(tree, path)) {
    try {
      specdec::commit_tree_path(engine, tree, path);
      specdec::fuzz::fail("the engine committed a broken path");
    } catch (const std::invalid_argument&) {
    }
    SPECDEC_FUZZ_CHECK(engine.tree_pending() && engine.size() == context.size(),
                       "a refused commit changed the engine");
    try {
      specdec::commit_tree_path(plain, tree, path);
      specdec::fuzz::fail("the fallback committed a broken path");
    } catch (const std::invalid_argument&) {
    }
    SPECDEC_FUZZ_CHECK(plain.size() == context.size(), "a refused commit changed the model");
    return;
  }
  specdec::commit_tree_path(plain, tree, path);
  specdec::commit_tree_path(treed, tree, path);
  specdec::commit_tree_path(engine, tree, path);
  std::vector<token_id> expect = context;
  for (const auto node : path) expect.push_back(tree.token(static_cast<std::size_t>(node)));
  SPECDEC_FUZZ_CHECK(plain.size() == expect.size() && treed.size() == expect.size() &&
                         engine.size() == expect.size(),
                     "size after commit");
  // The next row after the commit equals a fresh model fed the whole sequence.
  const token_id next = static_cast<token_id>(in.below(vocab));
  std::vector<float> row(vocab), fresh_rows((expect.size() + 1) * vocab);
  engine.append(std::span(&next, 1), row);
  l2::model fresh(tiny_weights(), {.threads = 1});
  expect.push_back(next);
  fresh.append(expect, fresh_rows);
  for (std::size_t t = 0; t < vocab; ++t)
    SPECDEC_FUZZ_CHECK(std::fabs(row[t] - fresh_rows[(expect.size() - 1) * vocab + t]) < 1e-4f,
                       "the engine after commit differs from a fresh run of the sequence");
  std::vector<float> r1(vocab), r2(vocab);
  plain.append(std::span(&next, 1), r1);
  treed.append(std::span(&next, 1), r2);
  SPECDEC_FUZZ_CHECK(r1 == r2, "the table models differ after commit");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  input in(data, size);
  std::optional<token_tree> tree;
  switch (in.byte() % 3) {
    case 0: {
      const std::size_t n = in.below(40);
      std::vector<token_id> tokens(n);
      std::vector<std::int32_t> parents(n + (in.byte() % 16 == 0 ? 1 : 0));
      for (auto& t : tokens) t = static_cast<token_id>(in.below(vocab + 1)) - (in.byte() % 32 == 0);
      for (std::size_t i = 0; i < parents.size(); ++i) {
        // Mostly valid: a parent at or after the previous one; sometimes anything.
        const std::int32_t prev = i <= 1 ? 0 : parents[i - 1];
        parents[i] = i == 0                ? -1
                     : in.byte() % 16 == 0 ? static_cast<std::int32_t>(in.below(2 * n + 2)) -
                                                 static_cast<std::int32_t>(n)
                                           : prev + static_cast<std::int32_t>(in.below(2));
        if (i > 0 && parents[i] >= static_cast<std::int32_t>(i) && in.byte() % 8) parents[i] = prev;
      }
      if (!parents.empty() && in.byte() % 32 == 0) parents[0] = 0;
      for (auto& t : tokens) t = t < 0 ? t : t % static_cast<token_id>(vocab);
      const bool valid = valid_arrays(tokens, parents);
      try {
        tree.emplace(tokens, parents);
      } catch (const std::invalid_argument&) {
        SPECDEC_FUZZ_CHECK(!valid, "valid arrays refused");
        return 0;
      }
      SPECDEC_FUZZ_CHECK(valid, "invalid arrays accepted");
      break;
    }
    case 1: {
      std::vector<std::size_t> factors(in.below(4));
      std::size_t width = 1, total = 1;
      for (auto& f : factors) {
        f = 1 + in.below(4);
        width *= f;
        total += width;
      }
      tree.emplace(token_tree::from_branching(factors, static_cast<token_id>(in.below(vocab))));
      SPECDEC_FUZZ_CHECK(tree->size() == total, "from_branching size");
      for (std::size_t i = 1; i < tree->size(); ++i)
        tree->set_token(i, static_cast<token_id>(in.below(vocab)));
      break;
    }
    default: {
      std::vector<std::vector<token_id>> cands(in.below(6));
      std::set<std::vector<token_id>> prefixes;
      for (auto& c : cands) {
        c.resize(in.below(6));
        for (auto& t : c) t = static_cast<token_id>(in.below(4));
        for (std::size_t k = 1; k <= c.size(); ++k)
          prefixes.emplace(c.begin(), c.begin() + static_cast<std::ptrdiff_t>(k));
      }
      const auto root = static_cast<token_id>(in.below(vocab));
      tree.emplace(token_tree::from_candidates(root, cands));
      SPECDEC_FUZZ_CHECK(tree->size() == 1 + prefixes.size(), "from_candidates size");
      for (const auto& c : cands) {
        std::vector<token_id> want{root};
        want.insert(want.end(), c.begin(), c.end());
        bool found = false;
        for (std::size_t i = 0; i < tree->size() && !found; ++i)
          found = tree->path_tokens(i) == want;
        SPECDEC_FUZZ_CHECK(found, "a candidate is not a root path");
      }
      break;
    }
  }
  check_structure(*tree);
  check_models(*tree, in);
  return 0;
}
