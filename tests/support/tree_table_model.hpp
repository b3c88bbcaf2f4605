// tests/support/tree_table_model.hpp - table_model with tree attention, by brute force.
#pragma once

#include <cstdint>
#include <span>
#include <stdexcept>
#include <vector>

#include "support/table_model.hpp"

namespace specdec::test {

// A TreeLanguageModel built on table_model by brute force: append_tree computes each node's row
// from the whole context plus the node's path; commit appends the path. Counts its calls.
class tree_table_model {
 public:
  explicit tree_table_model(table_model_options o = {}) : inner_(o) {}

  std::size_t vocab_size() const noexcept { return inner_.vocab_size(); }
  std::size_t size() const noexcept { return inner_.size(); }
  std::size_t max_size() const noexcept { return inner_.max_size(); }
  std::span<const token_id> tokens() const noexcept { return inner_.tokens(); }

  void append(std::span<const token_id> tokens, std::span<float> logits) {
    if (pending_) throw std::logic_error("tree_table_model: commit the pending tree first");
    inner_.append(tokens, logits);
  }
  void truncate(std::size_t n) {
    if (pending_) throw std::logic_error("tree_table_model: commit the pending tree first");
    inner_.truncate(n);
  }

  void append_tree(std::span<const token_id> tokens, std::span<const std::int32_t> parents,
                   std::span<float> logits) {
    const std::size_t v = vocab_size();
    if (pending_) throw std::logic_error("tree_table_model: a tree is already pending");
    if (tokens.size() != parents.size() || logits.size() != tokens.size() * v)
      throw std::invalid_argument("tree_table_model::append_tree: sizes");
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      if (tokens[i] < 0 || static_cast<std::size_t>(tokens[i]) >= v)
        throw std::out_of_range("tree_table_model::append_tree: token");
      if (parents[i] >= static_cast<std::int32_t>(i) || parents[i] < -1)
        throw std::invalid_argument("tree_table_model::append_tree: parent");
    }
    ++tree_calls_;
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      std::vector<token_id> ctx(inner_.tokens().begin(), inner_.tokens().end());
      std::vector<token_id> path;
      for (auto at = static_cast<std::int32_t>(i); at >= 0; at = parents[static_cast<std::size_t>(at)])
        path.insert(path.begin(), tokens[static_cast<std::size_t>(at)]);
      ctx.insert(ctx.end(), path.begin(), path.end());
      inner_.next_logits(ctx, logits.subspan(i * v, v));
    }
    pending_tokens_.assign(tokens.begin(), tokens.end());
    pending_parents_.assign(parents.begin(), parents.end());
    pending_ = true;
  }

  void commit(std::span<const std::int32_t> path) {
    if (!pending_) throw std::logic_error("tree_table_model: no pending tree");
    for (std::size_t k = 0; k < path.size(); ++k) {
      const auto node = static_cast<std::size_t>(path[k]);
      if (node >= pending_tokens_.size() ||
          pending_parents_[node] != (k == 0 ? -1 : path[k - 1]))
        throw std::invalid_argument("tree_table_model::commit: not a chain");
    }
    pending_ = false;
    ++commit_calls_;
    if (path.empty()) return;
    std::vector<token_id> toks;
    for (std::int32_t node : path) toks.push_back(pending_tokens_[static_cast<std::size_t>(node)]);
    std::vector<float> scratch(toks.size() * vocab_size());
    inner_.append(toks, scratch);
  }

  std::size_t tree_calls() const noexcept { return tree_calls_; }
  std::size_t commit_calls() const noexcept { return commit_calls_; }
  std::size_t append_calls() const noexcept { return inner_.append_calls(); }

 private:
  table_model inner_;
  bool pending_ = false;
  std::vector<token_id> pending_tokens_;
  std::vector<std::int32_t> pending_parents_;
  std::size_t tree_calls_ = 0, commit_calls_ = 0;
};
}  // namespace specdec::test
