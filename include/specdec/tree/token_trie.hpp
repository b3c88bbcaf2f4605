// specdec/tree/token_trie.hpp - a token tree built as the trie of candidate continuations
// (token_tree::from_candidates and assign_candidates): the n-gram drafter's many continuations
// become one tree whose shared prefixes are scored once. Included by tree/token_tree.hpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "specdec/tree/token_tree.hpp"
#include "specdec/tree/tree_shape.hpp"
#include "specdec/types.hpp"

namespace specdec {

/// Scratch of token_tree::assign_candidates, reused so that building a trie allocates nothing
/// once it has held a trie of that size. Not thread-safe.
struct trie_workspace {
  struct node {
    token_id token;
    std::int32_t parent, first_child, last_child, next_sibling;
    std::size_t children;
  };
  std::vector<node> nodes;
  std::vector<std::int32_t> order;  // breadth-first order of `nodes`, then their new indices
  std::vector<token_id> tokens;
  std::vector<std::int32_t> parents;
};

inline token_tree token_tree::from_candidates(token_id root,
                                              std::span<const std::vector<token_id>> candidates) {
  token_tree t;
  trie_workspace ws;
  t.assign_trie(root, candidates, nullptr, ws);
  return t;
}

inline token_tree token_tree::from_candidates(token_id root,
                                              std::span<const std::vector<token_id>> candidates,
                                              std::span<const std::size_t> branching) {
  token_tree t;
  trie_workspace ws;
  t.assign_trie(root, candidates, &branching, ws);
  return t;
}

template <class Candidates>
void token_tree::assign_candidates(token_id root, const Candidates& candidates,
                                   std::span<const std::size_t> branching, trie_workspace& ws) {
  assign_trie(root, candidates, &branching, ws);
}

template <class Candidates>
void token_tree::assign_trie(token_id root, const Candidates& candidates,
                             const std::span<const std::size_t>* shape, trie_workspace& ws) {
  using tnode = trie_workspace::node;
  auto& nodes = ws.nodes;
  if (shape) {  // the full shape bounds the trie: reserve it once
    const std::size_t most = shape_nodes(*shape, max_tree_nodes) + 1;
    nodes.reserve(most);
    ws.order.reserve(most);
    ws.tokens.reserve(most);
    ws.parents.reserve(most);
    reserve(most);
  }
  nodes.clear();
  nodes.push_back(tnode{root, -1, -1, -1, -1, 0});
  std::size_t c = 0;
  for (const auto& candidate : candidates) {
    std::size_t at = 0;
    for (std::size_t j = 0; j < candidate.size(); ++j) {
      const token_id t = candidate[j];
      if (t < 0)
        throw std::invalid_argument("token_tree::from_candidates: candidates[" +
                                    std::to_string(c) + "][" + std::to_string(j) +
                                    "] = " + std::to_string(t) + " is negative");
      std::int32_t child = nodes[at].first_child;  // a linear scan of at most branching[j]
      while (child >= 0 && nodes[static_cast<std::size_t>(child)].token != t)
        child = nodes[static_cast<std::size_t>(child)].next_sibling;
      if (child >= 0) {
        at = static_cast<std::size_t>(child);
        continue;
      }
      // `at` sits at depth j: a new child must fit the shape there.
      if (shape && (j >= shape->size() || nodes[at].children >= (*shape)[j])) break;
      if (nodes.size() >= max_tree_nodes)
        throw std::invalid_argument("token_tree::from_candidates: more than max_tree_nodes = " +
                                    std::to_string(max_tree_nodes) + " nodes");
      const auto id = static_cast<std::int32_t>(nodes.size());
      nodes.push_back(tnode{t, static_cast<std::int32_t>(at), -1, -1, -1, 0});
      tnode& parent = nodes[at];
      if (parent.last_child >= 0)
        nodes[static_cast<std::size_t>(parent.last_child)].next_sibling = id;
      else
        parent.first_child = id;
      parent.last_child = id;
      parent.children += 1;
      at = static_cast<std::size_t>(id);
    }
    ++c;
  }
  // Breadth-first flattening: `order` lists the nodes level by level, children in the order
  // the candidates introduced them; a node's new index is its place in `order`.
  auto& order = ws.order;
  order.assign(1, 0);
  for (std::size_t i = 0; i < order.size(); ++i)
    for (std::int32_t k = nodes[static_cast<std::size_t>(order[i])].first_child; k >= 0;
         k = nodes[static_cast<std::size_t>(k)].next_sibling)
      order.push_back(k);
  ws.tokens.clear();
  ws.parents.clear();
  for (std::size_t i = 0; i < order.size(); ++i) {
    tnode& n = nodes[static_cast<std::size_t>(order[i])];
    ws.tokens.push_back(n.token);
    ws.parents.push_back(n.parent < 0 ? -1
                                      : nodes[static_cast<std::size_t>(n.parent)].next_sibling);
    n.next_sibling = static_cast<std::int32_t>(i);  // from here on: the node's new index
  }
  assign(ws.tokens, ws.parents);
}

}  // namespace specdec
