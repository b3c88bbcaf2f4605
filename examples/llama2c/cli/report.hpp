// llama2c/cli/report.hpp - specdec-generate's --json output: its options as JSON; the statistics,
// names and lines both command lines print come from common/cli/report.hpp.
//
// nlohmann/json is a dependency of this example only; the library itself depends on Eigen alone.
// The schema is documented in docs/llama2c.md ("--json").
#pragma once

#include <cstdio>
#include <nlohmann/json.hpp>
#include <specdec/decoder.hpp>
#include <specdec/stats.hpp>
#include <string>

#include "common/cli/report.hpp"
#include "llama2c/cli/cli_options.hpp"

namespace specdec::llama2c {

using specdec::cli::progress_line;
using specdec::cli::sampling_line;
using specdec::cli::stats_json;
using specdec::cli::stop_reason_name;
using specdec::cli::verification_name;

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
  j["n_gpu_layers"] = c.n_gpu_layers ? nlohmann::ordered_json(*c.n_gpu_layers)
                                     : nlohmann::ordered_json(nullptr);
  j["n_predict"] = c.n_predict == unlimited ? nlohmann::ordered_json(nullptr)
                                            : nlohmann::ordered_json(c.n_predict);
  j["ctx_size"] = c.ctx_size;
  j["threads"] = c.threads;
  j["sampling"] = specdec::cli::sampling_json(c);
  j["sampling"]["repeat_penalty"] = c.penalties.repeat;
  j["sampling"]["repeat_last_n"] = c.penalties.last_n;
  j["sampling"]["frequency_penalty"] = c.penalties.frequency;
  j["sampling"]["presence_penalty"] = c.penalties.presence;
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

}  // namespace specdec::llama2c
