// tests/support/exact_joint.hpp - the exact distribution of a model's next tokens, enumerated.
#pragma once

#include <vector>

#include <specdec/math/warp.hpp>

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
