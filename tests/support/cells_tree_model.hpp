// tests/support/cells_tree_model.hpp - tree_table_model with a fixed number of cache cells, as an
// engine with a fixed KV size (llama.cpp's n_ctx): every pending tree node takes a cell, so
// append_tree needs size() + nodes <= max_size(), not only size() + depth.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>

#include "support/tree_table_model.hpp"

namespace specdec::test {

class cells_tree_model {
 public:
  explicit cells_tree_model(table_model_options o) : inner_(o), cells_(o.max_size) {}

  std::size_t vocab_size() const noexcept { return inner_.vocab_size(); }
  std::size_t size() const noexcept { return inner_.size(); }
  std::size_t max_size() const noexcept { return cells_; }
  std::span<const token_id> tokens() const noexcept { return inner_.tokens(); }

  void append(std::span<const token_id> tokens, std::span<float> logits) {
    inner_.append(tokens, logits);
  }
  void truncate(std::size_t n) { inner_.truncate(n); }

  void append_tree(std::span<const token_id> tokens, std::span<const std::int32_t> parents,
                   std::span<float> logits) {
    if (size() + tokens.size() > cells_)
      throw std::length_error("cells_tree_model::append_tree: " + std::to_string(tokens.size()) +
                              " nodes after " + std::to_string(size()) + " tokens exceed " +
                              std::to_string(cells_) + " cells");
    inner_.append_tree(tokens, parents, logits);
  }
  void commit(std::span<const std::int32_t> path) { inner_.commit(path); }

  std::size_t tree_calls() const noexcept { return inner_.tree_calls(); }

 private:
  tree_table_model inner_;
  std::size_t cells_;
};

}  // namespace specdec::test
