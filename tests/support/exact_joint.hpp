// tests/support/exact_joint.hpp - the exact distribution of a model's next tokens, enumerated.
#pragma once

#include <vector>

#include <specdec/decoder.hpp>
#include <specdec/math/warp.hpp>

#include <span>
#include <stdexcept>

#include "support/table_model.hpp"

namespace specdec::test {

/// P(next `length` tokens = each sequence) under the warped table model, in lexicographic order
/// (index = t0 * V^(length-1) + ... + t_{length-1}).
inline std::vector<double> exact_joint(const table_model& target, std::vector<token_id> context,
                                       std::size_t length, const sampling_params& sp) {
  const std::size_t v = target.vocab_size();
  std::vector<double> out;
  std::vector<float> logits(v), p(v);
  target.next_logits(context, logits);
  warp(logits, sp, p);
  for (std::size_t t = 0; t < v; ++t) {
    if (length == 1) {
      out.push_back(p[t]);
      continue;
    }
    context.push_back(static_cast<token_id>(t));
    for (double x : exact_joint(target, context, length - 1, sp)) out.push_back(p[t] * x);
    context.pop_back();
  }
  return out;
}

}  // namespace specdec::test

namespace specdec::test {

/// Counts of the first three generated tokens over `trials` runs (seed = first_seed + i), in
/// exact_joint's order, and the draft tokens accepted over all runs.
struct joint_counts {
  std::vector<std::size_t> counts;
  std::size_t accepted = 0;
};

template <class Decoder>
joint_counts sample_first_three(Decoder& decoder, std::span<const token_id> prompt,
                                generate_options o, std::size_t vocab, int trials,
                                std::uint64_t first_seed = 0) {
  joint_counts out;
  out.counts.assign(vocab * vocab * vocab, 0);
  o.max_new_tokens = 3;
  for (int t = 0; t < trials; ++t) {
    o.sampling.seed = first_seed + static_cast<std::uint64_t>(t);
    const auto r = decoder.generate(prompt, o);
    if (r.tokens.size() != 3) throw std::logic_error("sample_first_three: a run ended early");
    const auto at = [&](std::size_t i) { return static_cast<std::size_t>(r.tokens[i]); };
    out.counts[(at(0) * vocab + at(1)) * vocab + at(2)]++;
    out.accepted += r.stats.accepted_tokens;
  }
  return out;
}

}  // namespace specdec::test
