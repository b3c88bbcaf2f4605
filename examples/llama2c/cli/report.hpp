// llama2c/cli/report.hpp - specdec-generate's --json output: options and statistics as JSON values.
//
// nlohmann/json is a dependency of this example only; the library itself depends on Eigen alone.
// The schema is documented in docs/llama2c.md ("--json").
#pragma once

#include <cstdio>
#include <nlohmann/json.hpp>
#include <specdec/decoder.hpp>
#include <specdec/stats.hpp>
#include <string>

#include "llama2c/cli/cli_options.hpp"

namespace specdec::llama2c {

/// The name of a stop reason as it appears in the JSON ("max_new_tokens", "stop_token",
/// "callback", "context_full").
inline const char* stop_reason_name(specdec::stop_reason r) {
  switch (r) {
    case specdec::stop_reason::max_new_tokens:
      return "max_new_tokens";
    case specdec::stop_reason::stop_token:
      return "stop_token";
    case specdec::stop_reason::callback:
      return "callback";
    case specdec::stop_reason::context_full:
      return "context_full";
  }
  return "unknown";
}

/// The name of a verification rule as both command lines spell it ("token", "block", "coupled",
/// "sample-match").
inline const char* verification_name(specdec::chain_verification v) {
  switch (v) {
    case specdec::chain_verification::token:
      return "token";
    case specdec::chain_verification::block:
      return "block";
    case specdec::chain_verification::coupled:
      return "coupled";
    case specdec::chain_verification::sample_match:
      return "sample-match";
  }
  return "unknown";
}

inline const char* draft_kind_name(draft_kind d) {
  switch (d) {
    case draft_kind::none:
      return "none";
    case draft_kind::layers:
      return "layers";
    case draft_kind::model:
      return "model";
    case draft_kind::ngram:
      return "ngram";
    case draft_kind::heads:
      return "heads";
  }
  return "unknown";
}

/// The options in force (after defaults and aliases), as JSON. Unlimited -n is null.
inline nlohmann::ordered_json options_json(const cli_options& c) {
  nlohmann::ordered_json j;
  j["model"] = c.model;
  j["tokenizer"] = c.tokenizer;
  j["n_predict"] = c.n_predict == unlimited ? nlohmann::ordered_json(nullptr)
                                            : nlohmann::ordered_json(c.n_predict);
  j["ctx_size"] = c.ctx_size;
  j["threads"] = c.threads;
  j["sampling"] = {{"temperature", c.sampling.temperature},
                   {"top_k", c.sampling.top_k},
                   {"top_p", c.sampling.top_p},
                   {"min_p", c.sampling.min_p},
                   {"repeat_penalty", c.penalties.repeat},
                   {"repeat_last_n", c.penalties.last_n},
                   {"frequency_penalty", c.penalties.frequency},
                   {"presence_penalty", c.penalties.presence},
                   {"seed", c.sampling.seed}};
  nlohmann::ordered_json d;
  d["kind"] = draft_kind_name(c.draft);
  d["spec"] = c.draft_text;
  if (c.draft == draft_kind::layers) d["layers"] = c.draft_layers;
  d["p_min"] = c.draft_p_min;
  d["temperature"] = c.draft_temperature ? nlohmann::ordered_json(*c.draft_temperature)
                                         : nlohmann::ordered_json(nullptr);
  if (c.draft == draft_kind::model) d["model"] = c.draft_model;
  if (c.draft == draft_kind::heads) {
    d["heads"] = c.draft_heads;
    d["heads_nodes"] = c.heads_nodes;
    d["heads_expand"] = c.heads_expand;
    d["heads_candidates"] = c.heads_sampled ? "sampled" : "top";
  }
  d["draft_max"] = c.k_auto ? nlohmann::ordered_json("auto") : nlohmann::ordered_json(c.k);
  d["draft_min"] = c.draft_min;
  if (c.draft == draft_kind::ngram || c.ngram_first)
    d["ngram"] = {
        {"min", c.ngram.min_ngram}, {"max", c.ngram.max_ngram}, {"candidates", c.ngram_candidates}};
  d["tree"] = c.tree;  // [] for chains
  d["verification"] = verification_name(c.verification);
  d["replacement"] = c.draw == specdec::candidate_draw::without_replacement ? "without" : "with";
  j["draft"] = d;
  j["compare_plain"] = c.compare_plain;
  return j;
}

/// Every statistic a run recorded, and the rates derived from them. Times in seconds;
/// `decode` = total - prefill (what tokens_per_second divides by); `other` = the loop itself.
inline nlohmann::ordered_json stats_json(const specdec::decode_stats& s) {
  nlohmann::ordered_json j;
  j["generated_tokens"] = s.generated_tokens;
  j["target_calls"] = s.target_calls;
  j["tokens_per_target_call"] = s.tokens_per_target_call();
  j["draft_calls"] = s.draft_calls;
  j["draft_model_calls"] = s.draft_model_calls;
  j["drafted_tokens"] = s.drafted_tokens;
  j["drafted_nodes"] = s.drafted_nodes;
  j["accepted_tokens"] = s.accepted_tokens;
  j["acceptance_rate"] = s.acceptance_rate();
  nlohmann::ordered_json by_position = nlohmann::ordered_json::array();
  for (std::size_t i = 0; i < s.drafted_at.size(); ++i)
    by_position.push_back({{"position", i + 1},
                           {"drafted", s.drafted_at[i]},
                           {"accepted", i < s.accepted_at.size() ? s.accepted_at[i] : 0},
                           {"rate", s.acceptance_at(i)}});
  j["acceptance_by_position"] = by_position;
  // Per depth and sibling rank: candidates judged and accepted (a chain has rank 0 only).
  j["offered_at_rank"] = s.offered_at_rank;
  j["accepted_at_rank"] = s.accepted_at_rank;
  j["reused_prompt_tokens"] = s.reused_prompt_tokens;
  const double decode = s.total_seconds - s.prefill_seconds;
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

}  // namespace specdec::llama2c
