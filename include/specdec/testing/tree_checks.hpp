// specdec/testing/tree_checks.hpp - conformance checks (f1)-(f3) for TreeLanguageModel adapters:
// one append_tree equals appending each path alone, commit keeps exactly one path, bad trees are
// refused.
#pragma once

#include <algorithm>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <functional>
#include <limits>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "specdec/concepts/language_model.hpp"
#include "specdec/concepts/tree_language_model.hpp"
#include "specdec/detail/conformance.hpp"
#include "specdec/testing/result.hpp"
#include "specdec/types.hpp"

namespace specdec::testing {

namespace detail {

struct tree_spec {
  std::vector<token_id> tokens;
  std::vector<std::int32_t> parents;
  std::size_t prefix = 0;  // context length before the tree

  /// Node indices from a root down to `node`.
  std::vector<std::int32_t> path_to(std::int32_t node) const {
    std::vector<std::int32_t> p;
    for (std::int32_t i = node; i >= 0; i = parents[static_cast<std::size_t>(i)]) p.push_back(i);
    std::reverse(p.begin(), p.end());
    return p;
  }
  std::vector<token_id> tokens_of(std::span<const std::int32_t> path) const {
    std::vector<token_id> t;
    for (const auto i : path) t.push_back(tokens[static_cast<std::size_t>(i)]);
    return t;
  }
  bool is_leaf(std::size_t node) const {
    return std::find(parents.begin(), parents.end(), static_cast<std::int32_t>(node)) ==
           parents.end();
  }
};

template <class M>
tree_spec tree_for(const conformance_options& o, const M& m, std::span<const token_id> seq) {
  tree_spec t;
  t.prefix = std::max<std::size_t>(1, seq.size() / 2);
  if (!o.tree_tokens.empty() || !o.tree_parents.empty()) {
    if (o.tree_tokens.size() != o.tree_parents.size())
      throw check_failed{"conformance_options::tree_tokens has " +
                         std::to_string(o.tree_tokens.size()) + " nodes but tree_parents has " +
                         std::to_string(o.tree_parents.size())};
    for (std::size_t i = 0; i < o.tree_parents.size(); ++i)
      if (o.tree_parents[i] < -1 || o.tree_parents[i] >= static_cast<std::int32_t>(i))
        throw check_failed{"conformance_options::tree_parents[" + std::to_string(i) +
                           "] = " + std::to_string(o.tree_parents[i]) + " must be -1 or in [0, " +
                           std::to_string(i) + ")"};
    for (const token_id tok : o.tree_tokens)
      if (tok < 0 || static_cast<std::size_t>(tok) >= m.vocab_size())
        throw check_failed{"conformance_options::tree_tokens holds " + std::to_string(tok) +
                           ", outside the model's vocabulary"};
    t.tokens = o.tree_tokens;
    t.parents = o.tree_parents;
    return t;
  }
  // Two roots; the first is the sequence's own next token, so one path continues the sequence.
  t.parents = {-1, 0, 0, 1, 1, -1, 5};
  const auto v = static_cast<std::int64_t>(m.vocab_size());
  for (std::size_t i = 0; i < t.parents.size(); ++i) {
    const std::int64_t base = seq[(t.prefix + i) % seq.size()];
    t.tokens.push_back(static_cast<token_id>((base + static_cast<std::int64_t>(3 * i)) % v));
  }
  return t;
}

}  // namespace detail

/// (f1) One append_tree gives, for every node, the logits of appending its root-to-node path
/// alone after the same context (within tolerance), and leaves size() unchanged.
template <class Source>
requires detail::model_source<Source> && TreeLanguageModel<typename detail::model_of<Source>::type>
    check_result check_tree_append(Source& source, const conformance_options& o = {}) {
  return detail::run_check("tree_append", [&](check_result& r) {
    std::vector<token_id> seq;
    detail::tree_spec tree;
    std::vector<float> tree_logits;
    std::size_t v = 0;
    detail::with_fresh(source, [&](auto& m) {
      seq = detail::checked_sequence(o, m);
      tree = detail::tree_for(o, m, seq);
      v = m.vocab_size();
      detail::append(m, std::span<const token_id>(seq).first(tree.prefix));
      tree_logits.resize(tree.tokens.size() * v);
      m.append_tree(tree.tokens, tree.parents, std::span<float>(tree_logits));
      detail::expect(m.size() == tree.prefix, "size() is " + std::to_string(m.size()) +
                                                  " after append_tree; it must stay " +
                                                  std::to_string(tree.prefix) + " until commit");
      m.commit(std::span<const std::int32_t>());
      detail::expect(m.size() == tree.prefix,
                     "size() is " + std::to_string(m.size()) + " after commit of an empty path");
    });
    detail::comparer cmp(o.tolerance, v, r.max_abs_diff, "path alone", "tree");
    for (std::size_t leaf = 0; leaf < tree.tokens.size(); ++leaf) {
      if (!tree.is_leaf(leaf)) continue;
      const auto path = tree.path_to(static_cast<std::int32_t>(leaf));
      const auto toks = tree.tokens_of(path);
      detail::with_fresh(source, [&](auto& m) {
        detail::append(m, std::span<const token_id>(seq).first(tree.prefix));
        const auto got = detail::append(m, toks);
        for (std::size_t k = 0; k < path.size(); ++k) {
          const auto node = static_cast<std::size_t>(path[k]);
          cmp.rows(std::span<const float>(got).subspan(k * v, v),
                   std::span<const float>(tree_logits).subspan(node * v, v),
                   std::span<const token_id>(toks).subspan(k, 1), tree.prefix + k,
                   "tree node " + std::to_string(node) + " differs from appending its path to " +
                       "leaf " + std::to_string(leaf) + " alone");
        }
      });
    }
  });
}

/// (f2) commit(path) leaves the cache exactly as if only the path had been appended: for every
/// node's root path (and the empty path), the logits of two tokens appended after the commit
/// equal those after appending context + path + the two tokens in one call.
template <class Source>
requires detail::model_source<Source> && TreeLanguageModel<typename detail::model_of<Source>::type>
    check_result check_tree_commit(Source& source, const conformance_options& o = {}) {
  return detail::run_check("tree_commit", [&](check_result& r) {
    std::vector<token_id> seq;
    detail::tree_spec tree;
    detail::with_fresh(source, [&](auto& m) {
      seq = detail::checked_sequence(o, m);
      tree = detail::tree_for(o, m, seq);
    });
    const std::span<const token_id> s(seq);
    const std::vector<token_id> follow{seq[0], seq[1]};
    for (std::int32_t node = -1; node < static_cast<std::int32_t>(tree.tokens.size()); ++node) {
      const auto path = node < 0 ? std::vector<std::int32_t>{} : tree.path_to(node);
      const auto path_toks = tree.tokens_of(path);
      std::vector<token_id> full(s.begin(), s.begin() + static_cast<std::ptrdiff_t>(tree.prefix));
      full.insert(full.end(), path_toks.begin(), path_toks.end());
      full.insert(full.end(), follow.begin(), follow.end());
      std::vector<float> ref, got;
      std::size_t v = 0;
      detail::with_fresh(source, [&](auto& m) {
        v = m.vocab_size();
        const auto all = detail::append(m, full);
        ref.assign(all.end() - static_cast<std::ptrdiff_t>(2 * v), all.end());
      });
      detail::with_fresh(source, [&](auto& m) {
        detail::append(m, s.first(tree.prefix));
        std::vector<float> tree_logits(tree.tokens.size() * v);
        m.append_tree(tree.tokens, tree.parents, std::span<float>(tree_logits));
        m.commit(path);
        detail::expect(m.size() == tree.prefix + path.size(),
                       "size() is " + std::to_string(m.size()) + " after commit of a path of " +
                           std::to_string(path.size()) + " nodes after " +
                           std::to_string(tree.prefix) + " tokens");
        got = detail::append(m, follow);
      });
      detail::comparer cmp(o.tolerance, v, r.max_abs_diff);
      cmp.rows(ref, got, follow, tree.prefix + path.size(),
               "after commit of the path to node " + std::to_string(node) + " (length " +
                   std::to_string(path.size()) +
                   "), the next tokens' logits differ from appending that path alone");
    }
  });
}

/// (f3) Bad trees and paths throw and leave the context unchanged: a parent that is not earlier,
/// a token outside the vocabulary, a path that does not start at a root or is not a chain. A
/// valid commit after a rejected one still works.
template <class Source>
requires detail::model_source<Source> && TreeLanguageModel<typename detail::model_of<Source>::type>
    check_result check_tree_rejects_bad_input(Source& source, const conformance_options& o = {}) {
  return detail::run_check("tree_rejects_bad_input", [&](check_result& r) {
    detail::with_fresh(source, [&](auto& m) {
      const auto seq = detail::checked_sequence(o, m);
      const std::span<const token_id> s(seq);
      const std::size_t v = m.vocab_size(), h = 1;
      detail::append(m, s.first(h));
      std::vector<float> logits(3 * v);
      const auto rejects = [&](auto&& call, const std::string& what) {
        detail::expect_throws(call, what);
        detail::expect(m.size() == h, what + " threw but changed size() from " + std::to_string(h) +
                                          " to " + std::to_string(m.size()));
      };
      const std::vector<token_id> toks{seq[0], seq[1], seq[0]};
      const std::vector<std::int32_t> self_parent{-1, 1, 0}, good{-1, 0, 1};
      const auto bad_v = static_cast<token_id>(v);
      const std::vector<token_id> bad_toks{seq[0], bad_v, seq[1]};
      rejects([&] { m.append_tree(toks, self_parent, std::span<float>(logits)); },
              "append_tree with parents[1] = 1 (not earlier)");
      rejects([&] { m.append_tree(bad_toks, good, std::span<float>(logits)); },
              "append_tree with token " + std::to_string(bad_v) + " (= vocab_size)");
      m.append_tree(toks, good, std::span<float>(logits));
      const std::vector<std::int32_t> not_root{1, 2}, not_chain{0, 2};
      rejects([&] { m.commit(not_root); }, "commit of path {1, 2} (node 1 is not a root)");
      rejects([&] { m.commit(not_chain); }, "commit of path {0, 2} (2 is not a child of 0)");
      const std::vector<std::int32_t> full_path{0, 1, 2};
      m.commit(full_path);
      detail::expect(m.size() == h + 3,
                     "after rejected commits, a valid commit of 3 nodes left "
                     "size() = " +
                         std::to_string(m.size()));
      r.message = "bad parents, tokens and paths rejected";
    });
  });
}

}  // namespace specdec::testing
