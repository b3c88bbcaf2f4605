// specdec/stats.hpp - what a decoding run did and where its time went.
#pragma once

#include <cstddef>
#include <cstdio>
#include <string>
#include <vector>

namespace specdec {

/// Counters and timings of one generate() run (or of the steps since start()).
struct decode_stats {
  std::size_t generated_tokens = 0;   ///< tokens emitted to the caller
  /// Calls made to the target after the prompt: one a step for a chain or a tree the model scores
  /// in one call (append_tree, a batch's score); a tree on a model without append_tree takes one
  /// append per leaf and one to commit the kept path.
  std::size_t target_calls = 0;
  std::size_t steps = 0;              ///< draft-and-verify steps (each emits at least one token)
  std::size_t draft_calls = 0;        ///< drafter propose calls that returned >= 1 token
  std::size_t draft_model_calls = 0;  ///< appends on the draft model, when the drafter has one
  std::size_t drafted_tokens = 0;     ///< draft positions sent to the target (a tree: its depth)
  std::size_t drafted_nodes = 0;      ///< draft tokens sent to the target (a tree: all its nodes)
  std::size_t accepted_tokens = 0;    ///< draft tokens the verifier kept
  std::size_t reused_prompt_tokens = 0;  ///< prompt tokens the target already held (reuse_prefix)
  std::vector<std::size_t> drafted_at;   ///< [i]: steps whose draft had a token at position i
  std::vector<std::size_t> accepted_at;  ///< [i]: steps that accepted the draft at position i
  /// [d][r]: steps that judged the r-th candidate at depth d (its parent, or the root for d = 0,
  /// was accepted and had more than r children); a chain has only r = 0. With accepted_at_rank
  /// this is acceptance by depth and sibling rank (tree_plan.hpp's acceptance_profile).
  std::vector<std::vector<std::size_t>> offered_at_rank;
  /// [d][r]: steps that accepted, at depth d, the r-th candidate.
  std::vector<std::vector<std::size_t>> accepted_at_rank;
  double prefill_seconds = 0.0;  ///< feeding the prompt to the target
  double draft_seconds = 0.0;    ///< inside the drafter
  double target_seconds = 0.0;   ///< inside the target's append (after the prompt)
  double verify_seconds = 0.0;   ///< inside the verifier
  double total_seconds = 0.0;    ///< the whole run, prompt included

  /// Counts one step's candidates at depth d: `offered` of them judged (ranks 0..offered-1)
  /// and, if `kept`, the one of rank `rank` accepted.
  void count_judged(std::size_t d, std::size_t rank, std::size_t offered, bool kept) {
    if (offered_at_rank.size() <= d) {
      offered_at_rank.resize(d + 1);
      accepted_at_rank.resize(d + 1);
    }
    auto& o = offered_at_rank[d];
    auto& a = accepted_at_rank[d];
    if (o.size() < offered) o.resize(offered);
    if (a.size() < o.size()) a.resize(o.size());
    for (std::size_t r = 0; r < offered; ++r) o[r] += 1;
    if (kept && rank < a.size()) a[rank] += 1;
  }

  /// accepted / drafted positions, 0 when nothing was drafted. For trees this is the share of
  /// drafted depth that was accepted (MCSD's acceptance rate), not per node.
  double acceptance_rate() const noexcept {
    return drafted_tokens ? static_cast<double>(accepted_tokens) / drafted_tokens : 0.0;
  }
  /// Generated tokens per target call (1 for plain decoding): what speculation saves in calls.
  double tokens_per_target_call() const noexcept {
    return target_calls ? static_cast<double>(generated_tokens) / target_calls : 0.0;
  }
  /// Generated tokens per step: the block efficiency (tokens_per_target_call where each step is
  /// one call).
  double tokens_per_step() const noexcept {
    return steps ? static_cast<double>(generated_tokens) / steps : 0.0;
  }
  /// Seconds of decoding: the whole generation but the prompt's prefill.
  double decode_seconds() const noexcept { return total_seconds - prefill_seconds; }
  /// Generated tokens per second of decoding (prompt excluded).
  double tokens_per_second() const noexcept {
    const double t = decode_seconds();
    return t > 0.0 ? generated_tokens / t : 0.0;
  }
  /// Acceptance rate at draft position i (accepted_at[i] / drafted_at[i]).
  double acceptance_at(std::size_t i) const noexcept {
    return i < drafted_at.size() && drafted_at[i]
               ? static_cast<double>(accepted_at[i]) / drafted_at[i]
               : 0.0;
  }

  /// A multi-line human-readable report. The seconds beside tokens/s are the same seconds
  /// (decoding, prompt excluded); the prompt's are printed apart. Steps are printed beside the
  /// target calls where the two differ. Acceptance by draft position prints the rate with its
  /// counts (accepted/drafted), "-" where nothing was drafted; the draft's share of the time only
  /// when something was drafted.
  std::string summary() const {
    std::string s;
    char line[256];
    std::snprintf(line, sizeof line,
                  "generated %zu tokens in %.3f s (%.1f tokens/s), prompt %.3f s, %zu target "
                  "calls, %.2f tokens per target call",
                  generated_tokens, decode_seconds(), tokens_per_second(),
                  prefill_seconds, target_calls, tokens_per_target_call());
    s += line;
    if (steps > 0 && steps != target_calls) {
      std::snprintf(line, sizeof line, " (%zu steps, %.2f tokens per step)", steps, tokens_per_step());
      s += line;
    }
    s += "\n";
    std::snprintf(line, sizeof line, "drafted %zu, accepted %zu, acceptance rate %.3f\n",
                  drafted_tokens, accepted_tokens, acceptance_rate());
    s += line;
    if (!drafted_at.empty()) {
      s += "acceptance by draft position (accepted/drafted):";
      for (std::size_t i = 0; i < drafted_at.size(); ++i) {
        if (drafted_at[i] == 0)
          std::snprintf(line, sizeof line, " -");
        else
          std::snprintf(line, sizeof line, " %.2f (%zu/%zu)", acceptance_at(i),
                        i < accepted_at.size() ? accepted_at[i] : 0, drafted_at[i]);
        s += line;
      }
      s += "\n";
    }
    const double t = total_seconds > 0.0 ? total_seconds : 1.0;
    const double other = total_seconds - prefill_seconds - draft_seconds - target_seconds - verify_seconds;
    if (drafted_tokens > 0)
      std::snprintf(line, sizeof line,
                    "time: prefill %.1f%%, draft %.1f%%, target %.1f%%, verify %.1f%%, other %.1f%%\n",
                    100 * prefill_seconds / t, 100 * draft_seconds / t, 100 * target_seconds / t,
                    100 * verify_seconds / t, 100 * other / t);
    else  // nothing drafted: the drafter's time (asking and getting nothing) is counted as other
      std::snprintf(line, sizeof line, "time: prefill %.1f%%, target %.1f%%, verify %.1f%%, other %.1f%%\n",
                    100 * prefill_seconds / t, 100 * target_seconds / t, 100 * verify_seconds / t,
                    100 * (other + draft_seconds) / t);
    s += line;
    return s;
  }
};

}  // namespace specdec
