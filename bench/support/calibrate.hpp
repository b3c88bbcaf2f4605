// bench/support/calibrate.hpp - the cost curve t(n) of a model, measured in the benchmark's own
// process: the median wall time of an append of n tokens after a short context.
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>
#include <specdec/specdec.hpp>
#include <vector>

#include "bench/support/e2e.hpp"
#include "bench/support/timing.hpp"
#include "llama2c/reference.hpp"

namespace specdec::bench {

/// Median seconds of an append of n of run.c's reference tokens after a context of 32 (the model
/// is truncated back after each, and emptied at the end).
template <class Model>
double time_append(Model& m, std::size_t n, int reps = 7) {
  const std::size_t context = 32, vocab = m.vocab_size();
  const std::span<const token_id> ids(llama2c::reference_ids);
  std::vector<float> logits((context + n) * vocab);
  m.truncate(0);
  m.append(ids.first(context), std::span(logits).first(context * vocab));
  std::vector<token_id> tokens(n);
  for (std::size_t i = 0; i < n; ++i) tokens[i] = ids[(context + i) % ids.size()];
  std::vector<double> s;
  for (int r = 0; r < reps; ++r) {
    s.push_back(
        time_call<wall_clock>([&] { m.append(tokens, std::span(logits).first(n * vocab)); }));
    m.truncate(context);
  }
  m.truncate(0);
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
  time_append(m, max_n, 2);
  std::vector<std::vector<double>> samples(max_n + 1);
  for (int r = 0; r < rounds; ++r)
    for (std::size_t n = 1; n <= max_n; ++n) samples[n].push_back(time_append(m, n, 1));
  std::vector<double> t(max_n + 1, 0.0);
  for (std::size_t n = 1; n <= max_n; ++n) t[n] = std::max(median(samples[n]), t[n - 1]);
  return t;
}

}  // namespace specdec::bench
