// llamacpp/cli/llama_cli.hpp - specdec-llama's command line: argv in, checked llama_cli_options out.
// llama.cpp's spellings where llama.cpp has the flag (-m, -md / --spec-draft-model,
// --spec-draft-n-max, --spec-draft-n-min, --spec-draft-p-min, -p, -f, -n, -c, -t, --temp,
// --top-k, --top-p, --min-p, -s, -fa, --ignore-eos, --grammar, --grammar-file), specdec's own for
// the rest (--draft, --tree,
// --verification, --json, --compare-plain; --draft heads:FILE as specdec-generate's; -np N
// serves N requests in one context with specdec::batch_decoder, llama.cpp's --parallel).
// Parsing loads nothing; tests may call it freely.
#pragma once

#include <CLI/CLI.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include <specdec/decode/options.hpp>
#include <specdec/math/sampling_params.hpp>
#include <specdec/tree/tree_shape.hpp>

namespace specdec::llamacpp {

/// A bad flag or value; the message names the flag. specdec-llama prints it and exits with 2.
struct usage_error : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

/// Who drafts: nobody (plain decoding), a GGUF draft model (-md), n-gram prompt lookup, or draft
/// heads (Medusa or EAGLE-style, a specdec-train-heads file) on the target's hidden rows.
enum class llama_draft { none, model, ngram, heads };

/// llama.cpp's flash attention for both contexts (-fa). specdec-llama's default is off: with it
/// on, a row's logits depend slightly on where its cells lie in the KV cache (docs/llamacpp.md).
enum class flash_attention { off, on, automatic };

/// What specdec-llama was asked to do.
struct llama_cli_options {
  std::string model;        ///< -m: the target GGUF
  std::string draft_model;  ///< -md: the draft GGUF
  llama_draft draft = llama_draft::none;
  std::string heads_file;   ///< FILE of --draft heads:FILE
  std::string prompt;       ///< -p (or the contents of -f)
  std::string prompt_file;  ///< -f
  std::size_t n_predict = 128;
  std::size_t ctx_size = 0;  ///< -c; 0 = the model's trained context
  std::size_t threads = 0;   ///< -t; 0 = llama.cpp's default
  flash_attention flash_attn = flash_attention::off;  ///< -fa on|off|auto
  specdec::sampling_params sampling{.temperature = 0.8f, .top_k = 40, .top_p = 0.95f,
                                    .min_p = 0.05f};
  std::optional<std::size_t> k;  ///< --spec-draft-n-max; none = the cost-aware policy decides
  std::size_t draft_min = 0;     ///< --spec-draft-n-min: shorter drafts are not verified
  float draft_p_min = 0.0f;      ///< --spec-draft-p-min
  std::vector<std::size_t> tree;  ///< --tree 2x2x1; empty = chains
  specdec::chain_verification verification = specdec::chain_verification::token;
  std::string grammar_file;  ///< --grammar-file: a GBNF file
  std::string grammar;       ///< --grammar: GBNF text (llama.cpp's spelling); one of the two
  bool ignore_eos = false;  ///< --ignore-eos: end-of-generation tokens do not stop it
  /// -np / --parallel N: N requests decoded together (batch_model + batch_decoder), the prompts
  /// the lines of -f (cycled) or -p N times, request i seeded with -s + i; 0 = one request.
  std::size_t parallel = 0;
  bool json = false;
  bool compare_plain = false;
  std::string help;  ///< non-empty: print it, exit 0
};

/// The most leaves a --tree may have: llama.cpp's LLAMA_MAX_SEQ, one sequence per leaf.
inline constexpr std::size_t max_tree_leaves = 256;

/// The leaves of the full tree of `branching` (their product), saturated above max_tree_leaves.
inline std::size_t tree_leaves(std::span<const std::size_t> branching) noexcept {
  std::size_t leaves = 1;
  for (const std::size_t b : branching) {
    if (b > max_tree_leaves || leaves * b > max_tree_leaves) return max_tree_leaves + 1;
    leaves *= b;
  }
  return leaves;
}

/// Parses argv (without the program name). Throws usage_error naming the flag.
inline llama_cli_options parse_llama_cli(std::vector<std::string> args) {
  llama_cli_options c;
  CLI::App app{"specdec-llama: speculative decoding (specdec) on llama.cpp GGUF models"};
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  // llama.cpp's -md and -fa are two-letter short names, which CLI11 (like getopt) cannot declare.
  for (auto& a : args) {
    if (a == "-md") a = "--spec-draft-model";
    if (a == "-fa") a = "--flash-attn";
    if (a == "-np") a = "--parallel";
  }
  std::string draft = "auto", tree, verification = "token", fa = "off";
  std::size_t k = 0, n_predict = c.n_predict;
  long long n_signed = 0;
  std::uint64_t seed = 0;
  app.add_option("-m,--model", c.model, "target model (GGUF)")->required();
  app.add_option("--spec-draft-model,--model-draft", c.draft_model,
                 "draft model (GGUF, the target's vocabulary); also -md");
  app.add_option("--draft", draft,
                 "who drafts: none | model | ngram | heads:FILE (draft heads from "
                 "specdec-train-heads) (default: model with -md, else none)");
  app.add_option("-p,--prompt", c.prompt, "prompt text");
  app.add_option("-f,--file", c.prompt_file, "read the prompt from this file");
  app.add_option("-n,--n-predict", n_signed, "tokens to generate (-1: until end of text or a "
                                             "full context)")->default_val(128);
  app.add_option("-c,--ctx-size", c.ctx_size, "context size (0: the model's)");
  app.add_option("-t,--threads", c.threads, "threads (0: llama.cpp's default)");
  app.add_option("--flash-attn", fa, "flash attention: on | off | auto (llama.cpp's default is "
                                   "auto; off keeps a row independent of cache layout); also -fa");
  app.add_option("--temp", c.sampling.temperature, "temperature (0: greedy)")->default_val(0.8f);
  app.add_option("--top-k", c.sampling.top_k, "top-k (0: off)")->default_val(40);
  app.add_option("--top-p", c.sampling.top_p, "top-p (1: off)")->default_val(0.95f);
  app.add_option("--min-p", c.sampling.min_p, "min-p (0: off)")->default_val(0.05f);
  app.add_option("-s,--seed", seed, "random seed")->default_val(0);
  auto* kopt = app.add_option("--spec-draft-n-max,--draft-max", k,
                              "draft tokens per target call (none: chosen from the measured cost, "
                              "the speed policy)");
  app.add_option("--spec-draft-n-min,--draft-min", c.draft_min,
                 "drafts shorter than this are not verified");
  app.add_option("--spec-draft-p-min,--draft-p-min", c.draft_p_min,
                 "a draft model stops below this top probability");
  app.add_option("--tree", tree, "a token tree per step, branching per level (e.g. 2x2x1); a fixed "
                                 "shape (the speed policy is off)");
  app.add_option("--verification", verification,
                 "token | block (chains) | coupled (the same tokens as plain decoding with the "
                 "same seed) | sample-match (llama.cpp's rule, greedy drafts)");
  app.add_option("--grammar-file", c.grammar_file, "GBNF grammar file");
  app.add_option("--grammar", c.grammar, "GBNF grammar text");
  app.add_flag("--ignore-eos", c.ignore_eos, "do not stop at end-of-generation tokens");
  app.add_option("--parallel", c.parallel,
                 "serve N requests together in one context (one llama_decode per step for all), "
                 "each with -c / N of its cells: the lines of -f, or -p N times; also -np");
  app.add_flag("--json", c.json, "one JSON object on stdout at the end");
  app.add_flag("--compare-plain", c.compare_plain, "also time plain decoding, print the speed-up");
  try {
    std::vector<std::string> reversed(args.rbegin(), args.rend());
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    c.help = app.help();
    return c;
  } catch (const CLI::ParseError& e) {
    throw usage_error(e.what());
  }
  if (n_signed < -1) throw usage_error("-n: must be >= -1, got " + std::to_string(n_signed));
  n_predict = n_signed == -1 ? std::size_t(-1) : static_cast<std::size_t>(n_signed);
  if (n_predict == 0) throw usage_error("-n: must not be 0");
  c.n_predict = n_predict;
  c.sampling.seed = seed;
  try {
    c.sampling.validate();
  } catch (const std::invalid_argument& e) {
    throw usage_error(std::string("--temp/--top-p/--min-p: ") + e.what());
  }
  if (draft == "auto") c.draft = c.draft_model.empty() ? llama_draft::none : llama_draft::model;
  else if (draft == "none") c.draft = llama_draft::none;
  else if (draft == "model") c.draft = llama_draft::model;
  else if (draft == "ngram") c.draft = llama_draft::ngram;
  else if (draft.starts_with("heads:")) {
    c.draft = llama_draft::heads;
    c.heads_file = draft.substr(6);
    if (c.heads_file.empty()) throw usage_error("--draft heads:FILE: the path is empty");
  } else throw usage_error("--draft: '" + draft + "' is not none, model, ngram or heads:FILE");
  if (fa == "on") c.flash_attn = flash_attention::on;
  else if (fa == "auto") c.flash_attn = flash_attention::automatic;
  else if (fa != "off") throw usage_error("-fa: '" + fa + "' is not on, off or auto");
  if (c.draft == llama_draft::model && c.draft_model.empty())
    throw usage_error("--draft model: needs a draft model (-md FILE)");
  if (*kopt) {
    if (k > 64) throw usage_error("--spec-draft-n-max: at most 64, got " + std::to_string(k));
    c.k = k;
  }
  if (!(c.draft_p_min >= 0.0f && c.draft_p_min <= 1.0f))
    throw usage_error("--spec-draft-p-min: must be in [0, 1]");
  // Both act on a draft model's chains only: refused elsewhere rather than ignored.
  const std::string who = c.draft == llama_draft::none    ? "no drafter"
                          : c.draft == llama_draft::ngram ? "--draft ngram"
                                                          : "--draft heads:FILE";
  if (c.draft_p_min > 0.0f && c.draft != llama_draft::model)
    throw usage_error("--spec-draft-p-min: applies to a draft model (-md), not to " + who);
  if (c.draft_min > 0 && c.draft != llama_draft::model)
    throw usage_error("--spec-draft-n-min: applies to a draft model (-md), not to " + who);
  if (!tree.empty()) {
    try {
      c.tree = specdec::parse_branching(tree);
    } catch (const std::invalid_argument& e) {
      throw usage_error(std::string("--tree: ") + e.what());
    }
    if (c.draft == llama_draft::none) throw usage_error("--tree: needs a drafter (--draft)");
    if (tree_leaves(c.tree) > max_tree_leaves)
      throw usage_error("--tree " + tree + ": more than " + std::to_string(max_tree_leaves) +
                        " leaves; a tree is scored in one llama_decode with a sequence per leaf, "
                        "and llama.cpp takes at most " + std::to_string(max_tree_leaves) +
                        " sequences (LLAMA_MAX_SEQ)");
  }
  if (verification == "block") c.verification = specdec::chain_verification::block;
  else if (verification == "coupled") c.verification = specdec::chain_verification::coupled;
  else if (verification == "sample-match")
    c.verification = specdec::chain_verification::sample_match;
  else if (verification != "token")
    throw usage_error("--verification: '" + verification +
                      "' is not token, block, coupled or sample-match");
  if (c.verification == specdec::chain_verification::block && !c.tree.empty())
    throw usage_error("--verification block: applies to chains, not to --tree");
  if (c.prompt.empty() == c.prompt_file.empty() && !(c.prompt.empty() && c.prompt_file.empty()))
    throw usage_error("-p and -f: give one of them, not both");
  if (!c.grammar.empty() && !c.grammar_file.empty())
    throw usage_error("--grammar and --grammar-file: give one of them, not both");
  if (c.parallel > max_tree_leaves)
    throw usage_error("-np: at most " + std::to_string(max_tree_leaves) +
                      " requests (a sequence each; llama.cpp's LLAMA_MAX_SEQ), got " +
                      std::to_string(c.parallel));
  if (c.parallel > 0) {  // batch_model scores chains without hidden rows or row processors
    if (!c.tree.empty())
      throw usage_error("-np: --tree is not supported with --parallel (chains only)");
    if (c.draft == llama_draft::heads)
      throw usage_error("-np: --draft heads:FILE is not supported with --parallel");
    if (c.draft_min > 0)
      throw usage_error("-np: --spec-draft-n-min is not supported with --parallel");
    if (!c.grammar.empty() || !c.grammar_file.empty())
      throw usage_error("-np: --grammar is not supported with --parallel");
  }
  return c;
}

}  // namespace specdec::llamacpp
