// bench/support/calibrate.hpp - the cost curve t(n) of a model, measured in the benchmark's own
// process: the median wall time of an append of n tokens after a short context, appended once.
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>
#include <specdec/specdec.hpp>
#include <vector>

#include "bench/support/e2e.hpp"
#include "bench/support/timing.hpp"
#include "llama2c/engine/reference.hpp"

namespace specdec::bench {

/// Times appends of up to max_n of run.c's reference tokens after a context of 32: the context
/// is appended once, each timed append is truncated back to it, and the model is emptied when
/// the timer goes.
template <class Model>
class append_timer {
 public:
  append_timer(Model& m, std::size_t max_n)
      : m_(m), vocab_(m.vocab_size()), logits_((context + max_n) * vocab_), tokens_(max_n) {
    const std::span<const token_id> ids(llama2c::reference_ids);
    m_.truncate(0);
    m_.append(ids.first(context), std::span(logits_).first(context * vocab_));
    for (std::size_t i = 0; i < max_n; ++i) tokens_[i] = ids[(context + i) % ids.size()];
  }
  append_timer(const append_timer&) = delete;
  append_timer& operator=(const append_timer&) = delete;
  ~append_timer() { m_.truncate(0); }

  /// Wall seconds of one append of n <= max_n tokens.
  double operator()(std::size_t n) {
    const double s = time_call<wall_clock>([&] {
      m_.append(std::span(tokens_).first(n), std::span(logits_).first(n * vocab_));
    });
    m_.truncate(context);
    return s;
  }

 private:
  static constexpr std::size_t context = 32;
  Model& m_;
  std::size_t vocab_;
  std::vector<float> logits_;
  std::vector<token_id> tokens_;
};

/// Median seconds of an append of n tokens after a context of 32 (append_timer), over `reps`.
template <class Model>
double time_append(Model& m, std::size_t n, int reps = 7) {
  append_timer<Model> timer(m, n);
  std::vector<double> s;
  for (int r = 0; r < reps; ++r) s.push_back(timer(n));
  return median(s);
}

/// t(n) for n = 1..max_n (index 0 unused), as tree_plan.hpp's step_cost_model wants it. A
/// warm-up append of max_n tokens first touches the weights and the cache (first-touch page
/// faults are slow on some machines and would inflate the small n). Then `rounds` passes over
/// n = 1..max_n, one append per n each, and t(n) is the median over the rounds: a shared host
/// changes speed by 2x between phases, and timing every n in every round keeps the ratios t(n)/t(1)
/// from one phase instead of comparing small n from a fast phase with large n from a slow one.
/// Last, the curve is made non-decreasing (t(n) = max of t(1..n)): an append of more tokens
/// never does less work, so a dip is noise, and a planner would chase it.
template <class Model>
std::vector<double> cost_curve(Model& m, std::size_t max_n, int rounds = 7) {
  append_timer<Model> timer(m, max_n);
  for (int w = 0; w < 2; ++w) timer(max_n);
  std::vector<std::vector<double>> samples(max_n + 1);
  for (int r = 0; r < rounds; ++r)
    for (std::size_t n = 1; n <= max_n; ++n) samples[n].push_back(timer(n));
  std::vector<double> t(max_n + 1, 0.0);
  for (std::size_t n = 1; n <= max_n; ++n) t[n] = std::max(median(samples[n]), t[n - 1]);
  return t;
}

}  // namespace specdec::bench
