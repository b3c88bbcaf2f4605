// common/cli/report.hpp - what both command lines print about a run: the statistics as JSON
// (nlohmann/json), the sampling line with the seed used, the names of stop reasons and
// verification rules, the progress line. The statistics text itself is decode_stats::summary().
//
// nlohmann/json is a dependency of the examples only; the library depends on Eigen alone.
#pragma once

#include <cstdio>
#include <nlohmann/json.hpp>
#include <specdec/decoder.hpp>
#include <specdec/stats.hpp>
#include <string>

#include "common/cli/shared_flags.hpp"

namespace specdec::cli {

/// The name of a stop reason as it appears in the JSON (specdec::to_string's).
inline const char* stop_reason_name(specdec::stop_reason r) { return specdec::to_string(r); }

/// The name of a verification rule as both command lines spell it (specdec::to_string's).
inline const char* verification_name(specdec::verification_rule v) { return specdec::to_string(v); }

/// The sampling in force as JSON, the seed used included (`seed_drawn`: it was not given).
inline nlohmann::ordered_json sampling_json(const shared_options& c) {
  return {{"temperature", c.sampling.temperature},
          {"top_k", c.sampling.top_k},
          {"top_p", c.sampling.top_p},
          {"min_p", c.sampling.min_p},
          {"seed", c.sampling.seed},
          {"seed_drawn", !c.seed_given}};
}

/// "sampling: greedy, seed S" or "sampling: temperature T, top-k K, top-p P, min-p M, seed S",
/// with "(drawn; -s S repeats this run)" when the seed was not given.
inline std::string sampling_line(const shared_options& c) {
  char line[256];
  const auto& s = c.sampling;
  const std::string seed = std::to_string(s.seed) +
                           (c.seed_given ? "" : " (drawn; -s " + std::to_string(s.seed) +
                                                    " repeats this run)");
  if (s.temperature == 0.0f)
    std::snprintf(line, sizeof line, "sampling: greedy, seed %s", seed.c_str());
  else
    std::snprintf(line, sizeof line,
                  "sampling: temperature %g, top-k %zu, top-p %g, min-p %g, seed %s",
                  static_cast<double>(s.temperature), s.top_k, static_cast<double>(s.top_p),
                  static_cast<double>(s.min_p), seed.c_str());
  return line;
}

/// Every statistic a run recorded, and the rates derived from them. Times in seconds;
/// `decode` = total - prefill (what tokens_per_second divides by); `other` = the loop itself.
/// A draft position never drafted has rate null (not 0: nothing was rejected there).
inline nlohmann::ordered_json stats_json(const specdec::decode_stats& s) {
  nlohmann::ordered_json j;
  j["generated_tokens"] = s.generated_tokens;
  j["target_calls"] = s.target_calls;
  j["steps"] = s.steps;
  j["tokens_per_target_call"] = s.tokens_per_target_call();
  j["tokens_per_step"] = s.tokens_per_step();
  j["draft_calls"] = s.draft_calls;
  j["draft_model_calls"] = s.draft_model_calls;
  j["drafted_tokens"] = s.drafted_tokens;
  j["drafted_nodes"] = s.drafted_nodes;
  j["accepted_tokens"] = s.accepted_tokens;
  j["acceptance_rate"] = s.acceptance_rate();
  nlohmann::ordered_json by_position = nlohmann::ordered_json::array();
  for (std::size_t i = 0; i < s.drafted_at.size(); ++i)
    by_position.push_back(
        {{"position", i + 1},
         {"drafted", s.drafted_at[i]},
         {"accepted", i < s.accepted_at.size() ? s.accepted_at[i] : 0},
         {"rate", s.drafted_at[i] ? nlohmann::ordered_json(s.acceptance_at(i))
                                  : nlohmann::ordered_json(nullptr)}});
  j["acceptance_by_position"] = by_position;
  // Per depth and sibling rank: candidates judged and accepted (a chain has rank 0 only).
  j["offered_at_rank"] = s.offered_at_rank;
  j["accepted_at_rank"] = s.accepted_at_rank;
  j["reused_prompt_tokens"] = s.reused_prompt_tokens;
  const double decode = s.decode_seconds();
  j["seconds"] = {{"total", s.total_seconds},
                  {"prefill", s.prefill_seconds},
                  {"decode", decode},
                  {"draft", s.draft_seconds},
                  {"target", s.target_seconds},
                  {"verify", s.verify_seconds},
                  {"other", decode - s.draft_seconds - s.target_seconds - s.verify_seconds}};
  j["tokens_per_second"] = s.tokens_per_second();
  return j;
}

/// The progress line shown on a terminal: "\r<tokens> tokens, <rate> tokens/s".
inline std::string progress_line(std::size_t tokens, double seconds) {
  char line[96];
  std::snprintf(line, sizeof line, "\r%zu tokens, %.1f tokens/s ", tokens,
                seconds > 0.0 ? static_cast<double>(tokens) / seconds : 0.0);
  return line;
}

}  // namespace specdec::cli
