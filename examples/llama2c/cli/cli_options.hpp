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

#ifndef SPECDEC_MODELS_DIR
#define SPECDEC_MODELS_DIR "../shared/models"
#endif

namespace specdec::llama2c {

/// A bad flag or value. The message names the flag as typed and the value; specdec-generate
/// prints it and exits with status 2.
struct usage_error : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

/// Who drafts: nothing (plain decoding), the target's first L layers, a second checkpoint, or
/// n-gram prompt lookup.
enum class draft_kind { none, layers, model, ngram, heads };

/// Largest -k: a draft is appended to the target in one call and acceptance decays geometrically
/// with the position, so longer drafts only cost. (It also keeps N x K of --ngram-candidates far
/// below token_tree's max_tree_nodes.)
inline constexpr std::size_t max_draft_length = 1024;
/// Largest --threads.
inline constexpr std::size_t max_threads = 256;
/// -n -1 (llama.cpp's spelling): no token limit; generation ends at an end-of-text token or when
/// the context is full.
inline constexpr std::size_t unlimited = std::numeric_limits<std::size_t>::max();

/// What specdec-generate was asked to do, with every value checked against what can be checked
/// without loading a file.
struct cli_options {
  std::string model = std::string(SPECDEC_MODELS_DIR) + "/aidreams260K.bin";
  std::string tokenizer = std::string(SPECDEC_MODELS_DIR) + "/aidreams260K.tok512.bin";
  std::string prompt = "I dreamed";
  std::string prompt_file;     ///< -f: read the prompt from this file (program reads it)
  std::size_t n_predict = 64;  ///< new tokens, or `unlimited`
  specdec::sampling_params sampling{.temperature = 0.0f};
  /// --repeat-penalty and friends; when any is on, sampling.processor applies them.
  specdec::penalty_options penalties;
  draft_kind draft = draft_kind::layers;
  std::string draft_text = "layers:3";  ///< as given (none | ngram | layers:L | model:PATH)
  std::size_t draft_layers = 3;         ///< L of layers:L
  std::string draft_model;              ///< PATH of model:PATH or -md
  bool ngram_first = false;  ///< ngram+layers:L | ngram+model:PATH: prompt lookup first, the
                             ///< model only when it has nothing (specdec::composed_drafter)
  std::string draft_heads;              ///< FILE of heads:FILE (Medusa or EAGLE-style heads)
  std::size_t heads_nodes = 0;          ///< heads trees: at most this many nodes (0 = the shape)
  std::size_t heads_expand = 4;         ///< EAGLE trees: nodes expanded per level (0 = all)
  bool heads_sampled = true;            ///< heads under sampling: drawn candidates (else top)
  std::size_t k = 4;                    ///< draft tokens per target call (--draft-max)
  bool k_auto = false;  ///< -k auto: the speed policy (calibrate + speed_policy) plans every step
  std::size_t draft_min = 0;            ///< chains shorter than this are not verified (0 = off)
  std::optional<float> draft_temperature;  ///< --draft-temp (generate_options::draft_temperature)
  float draft_p_min = 0.0f;  ///< model drafts stop below this top probability (model_drafter_options::p_min)
  specdec::ngram_options ngram{.min_ngram = 2, .max_ngram = 4, .max_draft = 4};
  std::size_t ngram_candidates = 1;
  std::vector<std::size_t> tree;  ///< empty: a chain of k drafts
  specdec::candidate_draw draw = specdec::candidate_draw::iid;
  specdec::chain_verification verification = specdec::chain_verification::token;
  std::size_t ctx_size = 0;    ///< 0 = the checkpoint's seq_len
  std::size_t threads = 0;     ///< 0 = all cores
  bool quiet = false;          ///< stdout: exactly the generated text and a newline
  bool json = false;           ///< stdout: one JSON object at the end
  bool compare_plain = false;  ///< also time plain decoding of the same request
  std::string help;            ///< non-empty: --help was given; print it, exit 0
};

}  // namespace specdec::llama2c
