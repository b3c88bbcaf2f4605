// llamacpp/cli/llama_cli.hpp - specdec-llama's command line: argv in, checked llama_cli_options out.
// The flags specdec-generate shares (-p -f -n -c -t -ngl, sampling, -md, --spec-type, -k,
// --draft-min, --draft-p-min, --tree, --verification, --json, --compare-plain) come from
// common/cli/shared_flags.hpp with llama.cpp's spellings and defaults; this parser adds -m, -fa,
// --grammar, --grammar-file, --ignore-eos, -np (N requests in one context with
// specdec::batch_decoder, llama.cpp's --parallel), --rpc (llama.cpp's RPC servers) and -ngld (the
// draft model's layers offloaded), and reads --draft (none | model | ngram | heads:FILE). Parsing
// loads nothing and connects to nothing; tests may call it freely.
#pragma once

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

#include "common/cli/flag_parser.hpp"
#include "common/cli/shared_flags.hpp"
#include "llamacpp/adapters/rpc_servers.hpp"

namespace specdec::llamacpp {

/// A bad flag or value (the shared layer's type); the message names the flag. specdec-llama
/// prints it and exits with 2.
using usage_error = specdec::cli::usage_error;

/// Who drafts: nobody (plain decoding), a GGUF draft model (-md), n-gram prompt lookup, or draft
/// heads (Medusa or EAGLE-style, a specdec-train-heads file) on the target's hidden rows.
enum class llama_draft { none, model, ngram, heads };

/// llama.cpp's flash attention for both contexts (-fa), `automatic` by default as in llama.cpp.
/// With it on, a row's logits depend slightly on where its cells lie in the KV cache
/// (docs/command-line.md).
enum class flash_attention { off, on, automatic };

/// What specdec-llama was asked to do. The flags specdec-generate shares (the request, sampling,
/// -md, -k, --tree, --verification, -ngl, ...) are the base's fields, with llama.cpp's defaults.
struct llama_cli_options : specdec::cli::shared_options {
  std::string model;  ///< -m: the target GGUF
  llama_draft draft = llama_draft::none;
  std::string heads_file;  ///< FILE of --draft heads:FILE
  flash_attention flash_attn = flash_attention::automatic;  ///< -fa on|off|auto
  /// Draft tokens per target call: -k N; none = the speed policy plans every step (-k auto, or
  /// a drafter without -k or --tree; with --tree, K is the tree's depth).
  std::optional<std::size_t> k;
  std::string grammar_file;  ///< --grammar-file: a GBNF file
  std::string grammar;       ///< --grammar: GBNF text (llama.cpp's spelling); one of the two
  bool ignore_eos = false;   ///< --ignore-eos: end-of-generation tokens do not stop it
  /// -np / --parallel N: N requests decoded together (batch_model + batch_decoder), the prompts
  /// the lines of -f (cycled) or -p N times, request i seeded with -s + i; 0 = one request.
  std::size_t parallel = 0;
  /// --rpc HOST:PORT,...: llama.cpp's RPC servers (ggml-rpc-server), devices for -ngl's layers
  std::string rpc_servers;
  /// -ngld N: the draft model's layers offloaded (auto = -1, all = -2); none = -ngl's value
  std::optional<long long> n_gpu_layers_draft;
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

/// Parses argv (without the program name). Throws usage_error naming the flag. Loads nothing;
/// the seed is not drawn here (shared_flags::draw_seed).
inline llama_cli_options parse_llama_cli(std::vector<std::string> args) {
  llama_cli_options c;
  auto words = specdec::cli::shared_short_words();
  words.insert(words.end(), {{"-fa", "--flash-attn"},
                             {"-np", "--parallel"},
                             {"-ngld", "--gpu-layers-draft"}});
  specdec::cli::flag_parser p("specdec-llama",
                              "specdec-llama: speculative decoding (specdec) on llama.cpp GGUF "
                              "models",
                              std::move(words));
  p.app().footer(
      "Spellings and defaults of llama.cpp; a later flag wins over an earlier one. No drafter "
      "runs unless one is asked for.\nExit status: 0 done; 2 bad flag or value; 1 a file cannot "
      "be read or llama.cpp or the decoder refuses the request.");
  std::string model, draft, fa, grammar_file, grammar, parallel, rpc, ngld;
  bool ignore_eos = false;
  const char* m = "Model";
  CLI::Option* model_opt = p.text("-m,--model", model, "target model (GGUF), required", m, "PATH");
  CLI::Option* fa_opt = p.text("--flash-attn", fa,
                               "flash attention, also -fa: on | off | auto (default auto, as "
                               "llama.cpp; it changes the logits' last bits, see "
                               "docs/command-line.md)",
                               m, "FA");
  specdec::cli::shared_flags shared;
  shared.declare(p, {.draft = "who drafts: none | model (the -md model) | ngram (prompt lookup) | "
                              "heads:FILE (draft heads from specdec-train-heads) (default: model "
                              "with -md, else none)",
                     .threads = "0 = llama.cpp's",
                     .prompt = "",
                     .ngl = "passed to llama.cpp's model parameters (default: llama.cpp's; this "
                            "build offloads only where ggml has a GPU backend)",
                     .max_k = 64});
  const char* r = "Request";
  CLI::Option* grammar_file_opt = p.text("--grammar-file", grammar_file, "GBNF grammar file", r,
                                         "PATH");
  CLI::Option* grammar_opt = p.text("--grammar", grammar, "GBNF grammar text", r);
  p.flag("--ignore-eos", ignore_eos, "do not stop at end-of-generation tokens", r);
  CLI::Option* parallel_opt =
      p.text("--parallel", parallel,
             "serve N requests together in one context (one llama_decode per step for all), "
             "each with -c / N of its cells: the lines of -f, or -p N times; also -np; K = -k "
             "or 4 (no speed policy)",
             r, "N");
  CLI::Option* rpc_opt =
      p.text("--rpc", rpc,
             "llama.cpp's RPC servers (ggml-rpc-server), comma-separated HOST:PORT: the target's "
             "-ngl layers go to them, split by their free memory (the draft model's only with "
             "-ngld)",
             m, "SERVERS");
  CLI::Option* ngld_opt =
      p.text("--gpu-layers-draft", ngld,
             "the draft model's layers offloaded (N, auto or all), also -ngld (default: -ngl's "
             "value; -ngld 0 keeps the draft model on this machine's CPU)",
             m, "N");
  if (!p.parse(std::move(args))) {
    c.help = p.help();
    return c;
  }
  shared.finish(p, c);
  if (!p.given(model_opt) || model.empty()) throw usage_error("-m: the target model is required");
  c.model = model;
  c.ignore_eos = ignore_eos;
  if (p.given(grammar_file_opt)) c.grammar_file = grammar_file;
  if (p.given(grammar_opt)) c.grammar = grammar;
  if (p.given(parallel_opt)) c.parallel = p.whole(parallel_opt, parallel);
  if (p.given(rpc_opt)) {
    try {
      parse_rpc_servers(rpc);
    } catch (const std::invalid_argument& e) {
      throw usage_error(e.what());
    }
    c.rpc_servers = rpc;
  }
  if (p.given(ngld_opt)) {  // as -ngl: N layers, auto (-1) or all (-2)
    long long v = 0;
    if (ngld == "auto") v = -1;
    else if (ngld == "all") v = -2;
    else if (specdec::cli::parse_number(ngld, v) != specdec::cli::number_read::ok || v < 0)
      p.bad(ngld_opt, ngld, "is not a whole number, auto or all");
    c.n_gpu_layers_draft = v;
  }
  try {
    c.sampling.validate();
  } catch (const std::invalid_argument& e) {
    throw usage_error(std::string("sampling: ") + e.what());
  }
  const std::string& d = c.drafter;
  if (d.empty() || d == "none") c.draft = llama_draft::none;
  else if (d == "model") c.draft = llama_draft::model;
  else if (d == "ngram") c.draft = llama_draft::ngram;
  else if (d.starts_with("heads:")) {
    c.draft = llama_draft::heads;
    c.heads_file = d.substr(6);
    if (c.heads_file.empty()) p.bad(shared.draft_flag(), d, "the path in heads:FILE is empty");
  } else {
    p.bad(shared.draft_flag(), d, "is not none, model, ngram or heads:FILE");
  }
  if (p.given(fa_opt)) {
    if (fa == "on") c.flash_attn = flash_attention::on;
    else if (fa == "off") c.flash_attn = flash_attention::off;
    else if (fa != "auto") p.bad(fa_opt, fa, "is not on, off or auto");
  }
  if (c.draft == llama_draft::model && c.draft_model.empty())
    throw usage_error("--draft model: needs a draft model (-md FILE)");
  const bool drafting = c.draft != llama_draft::none;
  p.only_with({shared.tree_flag()}, drafting, "a drafter (--draft, -md or --spec-type)");
  const std::size_t k = shared.finish_k(p, c, drafting, !c.tree.empty(), 0);
  if (drafting && !c.k_auto) c.k = k;
  // Both act on a draft model's chains only: refused elsewhere rather than ignored.
  const std::string who = c.draft == llama_draft::none    ? "no drafter"
                          : c.draft == llama_draft::ngram ? "--draft ngram"
                                                          : "--draft heads:FILE";
  if (c.draft_p_min > 0.0f && c.draft != llama_draft::model)
    throw usage_error(p.typed(shared.draft_p_min_flag()) +
                      ": applies to a draft model (-md), not to " + who);
  if (c.draft_min > 0 && c.draft != llama_draft::model)
    throw usage_error(p.typed(shared.draft_min_flag()) +
                      ": applies to a draft model (-md), not to " + who);
  if (c.draft_min > 0 && c.k && c.draft_min > *c.k)
    p.bad(shared.draft_min_flag(), std::to_string(c.draft_min),
          "exceeds the largest draft (" + p.typed(shared.k_flag()) + " " + std::to_string(*c.k) +
              ")");
  if (tree_leaves(c.tree) > max_tree_leaves) {
    std::string shape;
    for (const std::size_t b : c.tree) shape += (shape.empty() ? "" : "x") + std::to_string(b);
    throw usage_error(p.typed(shared.tree_flag()) + " " + shape + ": more than " +
                      std::to_string(max_tree_leaves) +
                      " leaves; a tree is scored in one llama_decode with a sequence per leaf, "
                      "and llama.cpp takes at most " +
                      std::to_string(max_tree_leaves) + " sequences (LLAMA_MAX_SEQ)");
  }
  if (c.verification == specdec::verification_rule::block && !c.tree.empty())
    throw usage_error("--verification block: applies to chains, not to --tree");
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
