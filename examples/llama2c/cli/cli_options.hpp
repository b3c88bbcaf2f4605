// llama2c/cli/cli_options.hpp - what specdec-generate is asked to do: cli_options, the values the
// parser (cli.hpp) produces and the program and its JSON report (report.hpp) read, with the
// limits the parser checks them against and the error a bad flag raises.
#pragma once

#include <cstddef>
#include <limits>
#include <optional>
#include <specdec/decode/options.hpp>
#include <specdec/draft/ngram_options.hpp>
#include <specdec/math/penalties.hpp>
#include <specdec/math/sampling_params.hpp>
#include <specdec/tree/tree_draft.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/cli/shared_flags.hpp"
#include "llama2c/cli/draft_spec.hpp"

#ifndef SPECDEC_MODELS_DIR
#define SPECDEC_MODELS_DIR "../shared/models"
#endif

namespace specdec::llama2c {

/// A bad flag or value (the shared layer's type). The message names the flag as typed and the
/// value; specdec-generate prints it and exits with status 2.
using usage_error = specdec::cli::usage_error;

/// Largest -k: a draft is appended to the target in one call and acceptance decays geometrically
/// with the position, so longer drafts only cost. (It also keeps N x K of --ngram-candidates far
/// below token_tree's max_tree_nodes.)
inline constexpr std::size_t max_draft_length = 1024;
/// Largest --threads.
inline constexpr std::size_t max_threads = 256;
/// -n -1 (llama.cpp's spelling and default): no token limit; generation ends at an end-of-text
/// token or when the context is full.
inline constexpr std::size_t unlimited = specdec::cli::unlimited;

/// What specdec-generate was asked to do, with every value checked against what can be checked
/// without loading a file. The flags specdec-llama shares (the request, sampling, -md, -k, --tree,
/// --verification, ...) are the base's fields, with llama.cpp's defaults.
struct cli_options : specdec::cli::shared_options {
  cli_options() { prompt = "I dreamed"; }
  std::string model = std::string(SPECDEC_MODELS_DIR) + "/aidreams260K.bin";
  std::string tokenizer;  ///< empty: found beside the model (find_tokenizer)
  /// --repeat-penalty and friends; when any is on, sampling.processor applies them.
  specdec::penalty_options penalties;
  draft_kind draft = draft_kind::none;
  std::string draft_text = "none";  ///< as given (none | ngram | layers:L | model:PATH | ...)
  std::size_t draft_layers = 0;     ///< L of layers:L
  bool ngram_first = false;  ///< ngram+layers:L | ngram+model:PATH: prompt lookup first, the
                             ///< model only when it has nothing (specdec::composed_drafter)
  std::string draft_heads;       ///< FILE of heads:FILE (Medusa or EAGLE-style heads)
  std::size_t heads_nodes = 0;   ///< heads trees: at most this many nodes (0 = the shape)
  std::size_t heads_expand = 4;  ///< EAGLE trees: nodes expanded per level (0 = all)
  bool heads_sampled = true;     ///< heads under sampling: drawn candidates (else top)
  /// Draft tokens per target call in force: -k, or 8 (the policy's longest chain) with -k auto
  /// (k_auto), or 0 without a drafter.
  std::size_t k = 0;
  std::optional<float> draft_temperature;  ///< --draft-temp (generate_options::draft_temperature)
  specdec::ngram_options ngram{.min_ngram = 2, .max_ngram = 4, .max_draft = 4};
  std::size_t ngram_candidates = 1;
  specdec::candidate_draw draw = specdec::candidate_draw::iid;
  bool quiet = false;  ///< stdout: exactly the generated text and a newline
  std::string help;    ///< non-empty: --help was given; print it, exit 0
};

}  // namespace specdec::llama2c
