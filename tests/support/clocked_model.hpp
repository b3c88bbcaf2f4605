// tests/support/clocked_model.hpp - a table model on a counter clock, for the calibration tests
// (calibrate_test, cost_keeper_test): each append of n tokens advances a shared `now` by
// cost(n, call index), so measured times are exact.
#pragma once

#include <cstddef>
#include <functional>
#include <span>
#include <stdexcept>
#include <utility>

#include "support/table_model.hpp"

namespace specdec::test {

/// A table_model whose append advances `now` by cost(n, call index); an append of throw_at_
/// tokens throws std::runtime_error("clocked_model: refused") first (0: none).
class clocked_model {
 public:
  clocked_model(table_model_options o, double& now,
                std::function<double(std::size_t, std::size_t)> cost)
      : m_(o), now_(now), cost_(std::move(cost)) {}
  std::size_t vocab_size() const noexcept { return m_.vocab_size(); }
  std::size_t size() const noexcept { return m_.size(); }
  std::size_t max_size() const noexcept { return m_.max_size(); }
  std::span<const token_id> tokens() const noexcept { return m_.tokens(); }
  void append(std::span<const token_id> t, std::span<float> logits) {
    if (throw_at_ == t.size()) throw std::runtime_error("clocked_model: refused");
    m_.append(t, logits);
    now_ += cost_(t.size(), calls_++);
  }
  void truncate(std::size_t n) { m_.truncate(n); }
  std::size_t calls() const noexcept { return calls_; }
  std::size_t throw_at_ = 0;

 private:
  table_model m_;
  double& now_;
  std::function<double(std::size_t, std::size_t)> cost_;
  std::size_t calls_ = 0;
};

}  // namespace specdec::test
