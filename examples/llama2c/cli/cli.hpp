// llama2c/cli/cli.hpp - specdec-generate's command line: argv in, a checked cli_options out.
//
// The flags specdec-llama shares (sampling, the request, -md, -k, --spec-type, --tree, ...) are
// declared once in common/cli/shared_flags.hpp with llama.cpp's spellings and defaults; this
// parser adds specdec-generate's own (the checkpoint and tokenizer, --quiet, the penalties, the
// drafters only this engine has, n-gram and heads options) and reads --draft in its terms. Every
// check that needs no file runs here, so a bad flag or value is refused (exit status 2) before
// anything is loaded; what needs the model (the context size, the layer count) is checked by the
// program. Parsing has no side effects: tests call parse_cli() with any argv.
//
// To add a flag: a field in cli_options (cli_options.hpp), one text()/flag() in
// detail::cli_parser's constructor (or in shared_flags when specdec-llama means the same by it),
// its conversion and checks in finish(), and a line in docs/command-line.md.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <specdec/decode/options.hpp>
#include <specdec/draft/ngram_options.hpp>
#include <specdec/math/sampling_params.hpp>
#include <specdec/tree/token_tree.hpp>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "common/cli/flag_parser.hpp"
#include "common/cli/shared_flags.hpp"
#include "llama2c/cli/cli_options.hpp"
#include "llama2c/cli/draft_spec.hpp"

namespace specdec::llama2c {

namespace detail {

class cli_parser {
 public:
  cli_parser()
      : p_("specdec-generate",
           "Speculative decoding on a llama2.c checkpoint: a drafter proposes tokens, the model "
           "checks them in one call, and the output is what the model alone would produce.",
           specdec::cli::shared_short_words()) {
    CLI::App& app = p_.app();
    app.footer(
        "Spellings and defaults of llama.cpp (and vLLM's spellings) are accepted; a later flag "
        "wins over an earlier one. No drafter runs unless one is asked for.\n"
        "Exit status: 0 done; 2 bad flag or value (checked before anything is loaded); 1 a file "
        "cannot be read, or the model or decoder refuses a value (layers:L above the layer "
        "count, -c above the model's seq_len, a prompt that fills the context).");
    const char* m = "Model";
    model_ = p_.text("-m,--model", model_text_,
                     "llama2.c checkpoint (default: " SPECDEC_MODELS_DIR "/aidreams260K.bin)", m,
                     "PATH");
    tokenizer_ = p_.text("--tokenizer", tokenizer_text_,
                         "its tokenizer (default: beside the model, MODEL's stem + .tok*.bin, "
                         "then tokenizer.bin)",
                         m, "PATH");
    shared_.declare(p_, {.draft = "none | layers:L (the model's first L layers) | model:PATH | "
                                  "ngram | ngram+layers:L or ngram+model:PATH (prompt lookup "
                                  "first, the model when it has nothing) | heads:FILE (trained "
                                  "draft heads, specdec-train-heads) (default none)",
                         .threads = "0 = all cores, at most 256",
                         .prompt = " (default: \"I dreamed\")",
                         .ngl = "accepted for llama.cpp's command lines; this engine runs on the "
                                "CPU, so nothing is offloaded",
                         .max_k = max_draft_length,
                         .max_k_name = "the largest draft (max_draft_length)"});
    const char* r = "Request";
    p_.flag("--quiet", quiet_,
            "print exactly the generated text (no prompt, no statistics) and a newline", r);
    const char* s = "Sampling";
    repeat_penalty_ = p_.text("--repeat-penalty", repeat_penalty_text_,
                              "divide a positive logit, multiply a negative one, of each token "
                              "of the last --repeat-last-n (default 1 = off; a row processor, "
                              "specdec::penalties, so speculation stays exact)",
                              s, "F");
    repeat_last_n_ = p_.text("--repeat-last-n", repeat_last_n_text_,
                             "how many of the last tokens the penalties see (default 64)", s, "N");
    frequency_penalty_ =
        p_.text("--frequency-penalty", frequency_penalty_text_,
                "subtract F per occurrence in the window (default 0 = off)", s, "F");
    presence_penalty_ = p_.text("--presence-penalty", presence_penalty_text_,
                                "subtract F from every token of the window (default 0 = off)", s,
                                "F");
    const char* d = "Drafting (none unless asked for)";
    draft_temp_ = p_.text("--draft-temp", draft_temp_text_,
                          "the temperature drafts are sampled at when --temp > 0 (default: "
                          "--temp; 0 = the drafter's top tokens); exact at any value",
                          d, "T");
    ngram_min_ = p_.text("--ngram-min,--prompt-lookup-min", ngram_min_text_,
                         "shortest n-gram prompt lookup matches (default 2)", d, "N");
    ngram_max_ = p_.text("--ngram-max,--prompt-lookup-max", ngram_max_text_,
                         "longest n-gram prompt lookup matches (default 4)", d, "N");
    candidates_ = p_.text("--ngram-candidates", candidates_text_,
                          "verify up to N n-gram continuations at once, as a trie (default 1)",
                          d, "N");
    replacement_ = p_.text("--replacement", replacement_text_,
                           "with | without: how a sampled tree draws candidates (default with)",
                           d, "R");
    heads_nodes_ = p_.text("--heads-nodes", heads_nodes_text_,
                           "heads:FILE with --tree: at most N tree nodes, the most promising "
                           "(default 0 = the whole shape)",
                           d, "N");
    heads_expand_ = p_.text("--heads-expand", heads_expand_text_,
                            "EAGLE-style heads with --tree: nodes expanded per level (default 4, "
                            "0 = all)",
                            d, "N");
    heads_candidates_ = p_.text("--heads-candidates", heads_candidates_text_,
                                "sampled | top: heads' candidates under sampling, drawn from the "
                                "heads' distributions or their most likely tokens (default "
                                "sampled)",
                                d, "C");
  }

  std::string help() const { return p_.help(); }

  cli_options parse(std::vector<std::string> args) {
    cli_options c;
    if (!p_.parse(std::move(args))) {
      c.help = help();
      return c;
    }
    finish(c);
    return c;
  }

 private:
  void finish(cli_options& c) const {
    specdec::cli::shared_options& o = c;
    shared_.finish(p_, o);
    if (p_.given(model_)) {
      if (model_text_.empty()) p_.bad(model_, model_text_, "the path is empty");
      c.model = model_text_;
    }
    if (p_.given(tokenizer_)) {
      if (tokenizer_text_.empty()) p_.bad(tokenizer_, tokenizer_text_, "the path is empty");
      c.tokenizer = tokenizer_text_;
    }
    c.quiet = quiet_;
    if (c.quiet && o.json) throw usage_error("--quiet and --json: give one of them");
    if (c.quiet && o.compare_plain)
      throw usage_error(
          "--quiet and --compare-plain: --quiet prints only the text, so the comparison would "
          "not be shown (use --json for both)");
    finish_penalties(c);
    finish_draft(c);
  }

  void finish_penalties(cli_options& c) const {
    if (p_.given(repeat_penalty_))
      c.penalties.repeat = p_.real(repeat_penalty_, repeat_penalty_text_);
    if (!(c.penalties.repeat > 0.0f))
      p_.bad(repeat_penalty_, repeat_penalty_text_, "must be > 0 (1 = off)");
    if (p_.given(repeat_last_n_))
      c.penalties.last_n =
          static_cast<std::size_t>(p_.whole(repeat_last_n_, repeat_last_n_text_));
    if (p_.given(frequency_penalty_))
      c.penalties.frequency = p_.real(frequency_penalty_, frequency_penalty_text_);
    if (p_.given(presence_penalty_))
      c.penalties.presence = p_.real(presence_penalty_, presence_penalty_text_);
    try {
      c.penalties.validate();
    } catch (const std::invalid_argument& e) {
      throw usage_error(std::string("penalties: ") + e.what());
    }
    auto& sampling = c.sampling;
    if (c.penalties.repeat != 1.0f || c.penalties.frequency != 0.0f ||
        c.penalties.presence != 0.0f)
      sampling.processor = specdec::penalties(c.penalties);
    try {
      sampling.validate();  // the library's own rule, in case it is stricter than the parser's
    } catch (const std::invalid_argument& e) {
      throw usage_error(std::string("sampling: ") + e.what());
    }
  }

  // --draft in specdec-generate's terms: the drafter, its layers, model or heads file.
  void read_drafter(cli_options& c) const {
    const specdec::cli::shared_options& o = c;
    const CLI::Option* draft_flag = shared_.draft_flag();
    if (p_.given(draft_flag) && p_.given(shared_.model_draft_flag()))
      throw usage_error(p_.typed(draft_flag) + " and " + p_.typed(shared_.model_draft_flag()) +
                        ": give one of them");
    c.draft_text = o.drafter.empty()      ? "none"
                   : o.drafter == "model" ? "model:" + o.draft_model
                                          : o.drafter;
    try {
      const draft_spec d = parse_draft_spec(c.draft_text);
      c.draft = d.kind;
      c.draft_layers = d.layers;  // above the layer count: refused on loading
      c.ngram_first = d.ngram_first;
      if (d.kind == draft_kind::model) c.draft_model = d.model;
      c.draft_heads = d.heads;
    } catch (const std::invalid_argument& e) {
      p_.bad(draft_flag, c.draft_text, e.what());
    }
  }

  void finish_draft(cli_options& c) const {
    read_drafter(c);
    specdec::cli::shared_options& o = c;
    p_.only_with({heads_nodes_, heads_expand_, heads_candidates_}, c.draft == draft_kind::heads,
                 "--draft heads:FILE");
    if (p_.given(heads_nodes_))
      c.heads_nodes = p_.whole_at_most(heads_nodes_, heads_nodes_text_, specdec::max_tree_nodes,
                                       "the tree bound max_tree_nodes");
    if (p_.given(heads_expand_))
      c.heads_expand = p_.whole_at_most(heads_expand_, heads_expand_text_,
                                        specdec::max_tree_nodes, "the tree bound max_tree_nodes");
    if (p_.given(heads_candidates_)) {
      if (heads_candidates_text_ != "sampled" && heads_candidates_text_ != "top")
        p_.bad(heads_candidates_, heads_candidates_text_, "is not sampled or top");
      c.heads_sampled = heads_candidates_text_ == "sampled";
    }
    const bool drafting = c.draft != draft_kind::none;
    p_.only_with({shared_.tree_flag(), shared_.draft_min_flag()}, drafting,
                 "a drafter (--draft layers:L, model:PATH, ngram or heads:FILE, or -md)");
    const bool fixed_shape = !o.tree.empty() || p_.given(candidates_);
    // auto: the longest chain the policy plans (speed_policy's max_depth).
    c.k = shared_.finish_k(p_, o, drafting, fixed_shape, 8);
    if (c.draft_min > c.k)
      p_.bad(shared_.draft_min_flag(), std::to_string(c.draft_min),
             "exceeds the largest draft (" +
                 (c.k_auto ? "-k auto: " : p_.typed(shared_.k_flag()) + " ") +
                 std::to_string(c.k) + ")");
    p_.only_with({shared_.draft_p_min_flag()},
                 c.draft == draft_kind::layers || c.draft == draft_kind::model,
                 "--draft layers:L or model:PATH (a draft model)");
    if (p_.given(draft_temp_)) {
      c.draft_temperature = p_.real(draft_temp_, draft_temp_text_);
      if (!(*c.draft_temperature >= 0.0f))
        p_.bad(draft_temp_, draft_temp_text_, "must be >= 0 (0 = the drafter's top tokens)");
    }
    finish_ngram(c);
    finish_shape(c);
  }

  void finish_ngram(cli_options& c) const {
    p_.only_with({ngram_min_, ngram_max_, candidates_},
                 c.draft == draft_kind::ngram || c.ngram_first, "--draft ngram (prompt lookup)");
    if (p_.given(ngram_min_)) c.ngram.min_ngram = p_.whole(ngram_min_, ngram_min_text_);
    if (p_.given(ngram_max_)) c.ngram.max_ngram = p_.whole(ngram_max_, ngram_max_text_);
    c.ngram.max_draft = std::max<std::size_t>(c.k, 1);
    try {
      c.ngram.validate();
    } catch (const std::invalid_argument& e) {
      const std::string what = e.what();
      const bool about_min = what.starts_with("ngram_options.min_ngram");
      const CLI::Option* o = about_min ? ngram_min_ : ngram_max_;
      p_.bad(o,
             about_min ? std::to_string(c.ngram.min_ngram) : std::to_string(c.ngram.max_ngram),
             what);
    }
  }

  void finish_shape(cli_options& c) const {
    specdec::cli::shared_options& o = c;
    if (p_.given(replacement_)) {
      if (replacement_text_ != "with" && replacement_text_ != "without")
        p_.bad(replacement_, replacement_text_, "is not with or without");
      c.draw = replacement_text_ == "with" ? specdec::candidate_draw::iid
                                           : specdec::candidate_draw::without_replacement;
    }
    if (p_.given(candidates_)) {
      c.ngram_candidates = p_.whole(candidates_, candidates_text_);
      if (c.ngram_candidates == 0) p_.bad(candidates_, candidates_text_, "must be >= 1");
      const std::size_t depth = std::max<std::size_t>(c.k, 1);
      if (c.ngram_candidates > specdec::max_tree_nodes / depth)
        p_.bad(candidates_, candidates_text_,
               "times the draft length " + std::to_string(depth) +
                   " exceeds the tree bound max_tree_nodes = " +
                   std::to_string(specdec::max_tree_nodes));
    }
    if (c.ngram_candidates > 1) {
      if (!c.tree.empty()) throw usage_error("--ngram-candidates and --tree: give one of them");
      c.tree.assign(std::max<std::size_t>(c.k, 1), 1);  // N candidates of up to k tokens
      c.tree[0] = c.ngram_candidates;
    }
    const CLI::Option* v = shared_.verification_flag();
    if (o.verification_given && c.verification == specdec::verification_rule::block &&
        !c.tree.empty())
      throw usage_error(p_.typed(v) +
                        " block: applies to chains of drafts, not to --tree or --ngram-candidates");
    // Block verification keeps a chain's law and never accepts fewer tokens per call (measured
    // on EAGLE-style heads at temperature 0.8: more tokens per call); greedy it is exact match
    // either way. Trees use multi-candidate verification.
    if (!o.verification_given && c.tree.empty() && o.sampling.temperature > 0.0f)
      c.verification = specdec::verification_rule::block;
    if (c.ngram_first && !c.tree.empty())
      throw usage_error(p_.typed(shared_.draft_flag()) + " " + c.draft_text +
                        ": drafts chains, not --tree or --ngram-candidates");
    if (c.draft_min > 0 && !c.tree.empty())
      throw usage_error(p_.typed(shared_.draft_min_flag()) +
                        ": applies to chains of drafts, not to --tree or --ngram-candidates");
    if (p_.given(shared_.draft_p_min_flag()) && !c.tree.empty())
      throw usage_error(p_.typed(shared_.draft_p_min_flag()) +
                        ": applies to chains of drafts, not to --tree");
  }

  specdec::cli::flag_parser p_;
  specdec::cli::shared_flags shared_;
  CLI::Option *model_, *tokenizer_, *draft_temp_, *ngram_min_, *ngram_max_, *candidates_,
      *replacement_, *heads_nodes_, *heads_expand_, *heads_candidates_, *repeat_penalty_,
      *repeat_last_n_, *frequency_penalty_, *presence_penalty_;
  std::string model_text_, tokenizer_text_, draft_temp_text_, ngram_min_text_, ngram_max_text_,
      candidates_text_, replacement_text_, heads_nodes_text_, heads_expand_text_,
      heads_candidates_text_, repeat_penalty_text_, repeat_last_n_text_, frequency_penalty_text_,
      presence_penalty_text_;
  bool quiet_ = false;
};

}  // namespace detail

/// Parses specdec-generate's arguments (without the program name). Throws usage_error naming the
/// flag and the value; returns options with `help` set when --help was given. Each call builds
/// its own parser; calls share no state. The seed is not drawn here (see draw_seed).
inline cli_options parse_cli(std::vector<std::string> args) {
  detail::cli_parser p;
  return p.parse(std::move(args));
}

/// The same, from main's argc and argv.
inline cli_options parse_cli(int argc, const char* const* argv) {
  return parse_cli(std::vector<std::string>(argv + (argc > 0 ? 1 : 0), argv + argc));
}

/// The generated --help text.
inline std::string cli_help() { return detail::cli_parser().help(); }

/// Whether to show a progress line on stderr: only when stderr is a terminal, and not when the
/// text itself streams to that terminal (stdout a terminal, not --json), where the two would
/// interleave.
inline bool show_progress(bool stderr_tty, bool stdout_tty, bool json) {
  return stderr_tty && (json || !stdout_tty);
}

}  // namespace specdec::llama2c
