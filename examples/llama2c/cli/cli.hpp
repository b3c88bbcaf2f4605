// llama2c/cli/cli.hpp - specdec-generate's command line: argv in, a checked cli_options out.
//
// One CLI11 parser with a generated --help. It speaks today's flags and the spellings users of
// llama.cpp (llama-speculative, llama-lookup) and vLLM type for the same things. Every check that
// needs no file runs here, so a bad flag or value is refused (exit status 2) before anything is
// loaded; what needs the model (the context size, the layer count) is checked by the program.
// Parsing has no side effects: tests call parse_cli() with any argv.
//
// To add a flag: a field in cli_options (cli_options.hpp), one add_option()/add_flag() in
// detail::cli_parser's constructor, its conversion and checks in detail::cli_parser::finish(),
// and a line in docs/llama2c.md.
#pragma once

#include <CLI/CLI.hpp>
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <limits>
#include <specdec/decode/options.hpp>
#include <specdec/draft/ngram_options.hpp>
#include <specdec/math/sampling_params.hpp>
#include <specdec/tree/token_tree.hpp>
#include <specdec/tree/tree_draft.hpp>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "llama2c/cli/cli_options.hpp"

namespace specdec::llama2c {

namespace detail {

// Levenshtein distance, for "did you mean". O(|a| |b|).
inline std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1] ? 1u : 0u)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

class cli_parser {
 public:
  cli_parser() {
    app_.description(
        "Speculative decoding on a llama2.c checkpoint: a drafter proposes tokens, the model "
        "checks them in one call, and the output is what the model alone would produce.");
    app_.footer(
        "Spellings of llama.cpp and vLLM are accepted beside the others; a later flag wins over "
        "an earlier one.\n"
        "Exit status: 0 done; 2 bad flag or value (checked before anything is loaded); 1 a file "
        "cannot be read, or the model or decoder refuses a value (layers:L above the layer "
        "count, -c above the model's seq_len, a prompt that fills the context).");
    app_.set_help_flag("-h,--help", "print this help and exit");
    app_.allow_extras();  // unknown flags are reported by finish(), with a suggestion
    app_.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);

    const auto text = [&](const char* names, std::string& slot, const char* what, const char* group,
                          const char* type = "TEXT") {
      CLI::Option* o = app_.add_option(names, slot, what)->type_name(type)->group(group);
      all_.push_back(o);
      return o;
    };
    const char* m = "Model";
    model_ =
        text("-m,--model", model_text_,
             "llama2.c checkpoint (default: " SPECDEC_MODELS_DIR "/aidreams260K.bin)", m, "PATH");
    tokenizer_ = text("--tokenizer", tokenizer_text_,
                      "its tokenizer (default: aidreams260K.tok512.bin for the default model, "
                      "tokenizer.bin beside any other --model)",
                      m, "PATH");
    ctx_ = text("-c,--ctx-size", ctx_text_,
                "context in tokens, prompt included; at most the model's seq_len (default 0 = "
                "seq_len)",
                m, "N");
    threads_ =
        text("-t,--threads", threads_text_,
             "threads for the target and the draft (default 0 = all cores, at most 256)", m, "N");

    const char* p = "Prompt and output";
    prompt_ = text("-p,--prompt", prompt_text_, "prompt (default: \"I dreamed\")", p);
    file_ = text("-f,--file", file_text_,
                 "read the prompt from a file (one trailing newline dropped)", p, "PATH");
    n_ = text("-n,--n-predict", n_text_,
              "new tokens to generate, -1 = until end of text or a full context (default 64)", p,
              "N");
    add_flag("--quiet", quiet_,
             "print exactly the generated text (no prompt, no statistics) and a newline", p);
    add_flag("--json", json_,
             "print one JSON object at the end: request, options, text and every statistic", p);
    add_flag("--compare-plain", compare_plain_,
             "also decode the same request without a drafter and print both times, their ratio "
             "and, when greedy, whether the outputs agree",
             p);

    const char* s = "Sampling";
    temp_ = text("--temp,--temperature", temp_text_, "temperature, 0 = greedy (default 0)", s, "T");
    top_k_ =
        text("--top-k", top_k_text_, "keep the K most likely tokens (default 0 = off)", s, "K");
    top_p_ = text("--top-p", top_p_text_, "nucleus sampling, in (0, 1] (default 1 = off)", s, "P");
    min_p_ = text("--min-p", min_p_text_,
                  "drop tokens below P x the most likely, in [0, 1) (default 0 = off)", s, "P");
    seed_ = text("-s,--seed", seed_text_, "random seed (default 0)", s, "S");
    repeat_penalty_ = text("--repeat-penalty", repeat_penalty_text_,
                           "divide a positive logit, multiply a negative one, of each token of "
                           "the last --repeat-last-n (default 1 = off; a row processor, "
                           "specdec::penalties, so speculation stays exact)",
                           s, "F");
    repeat_last_n_ = text("--repeat-last-n", repeat_last_n_text_,
                          "how many of the last tokens the penalties see (default 64)", s, "N");
    frequency_penalty_ = text("--frequency-penalty", frequency_penalty_text_,
                              "subtract F per occurrence in the window (default 0 = off)", s, "F");
    presence_penalty_ = text("--presence-penalty", presence_penalty_text_,
                             "subtract F from every token of the window (default 0 = off)", s, "F");

    const char* d = "Drafting";
    draft_ = text("--draft", draft_text_,
                  "none | layers:L (the model's first L layers) | model:PATH | ngram | "
                  "ngram+layers:L or ngram+model:PATH (prompt lookup first, the model when it "
                  "has nothing) | heads:FILE (trained draft heads, specdec-train-heads) (default "
                  "layers:3)",
                  d, "D");
    model_draft_ =
        text("--model-draft,--spec-draft-model", model_draft_text_,
             "a draft checkpoint, the same as --draft model:PATH (also -md, as in llama.cpp)", d,
             "PATH");
    k_ = text("-k,--draft-max,--spec-draft-n-max,--num-speculative-tokens", k_text_,
              "draft tokens per target call, 0 = plain decoding (default 4, at most 1024); auto = "
              "the speed policy: the target's cost curve is measured first, then K, a tree or "
              "plain decoding is planned before every step from it and the acceptance seen",
              d, "K");
    draft_min_ = text("--draft-min,--spec-draft-n-min", draft_min_text_,
                      "do not verify drafts shorter than N tokens: decode one token plainly "
                      "instead (chains only; default 0 = verify any draft)",
                      d, "N");
    draft_p_min_ = text("--draft-p-min,--spec-draft-p-min", draft_p_min_text_,
                        "a model draft stops at the first position whose top draft probability "
                        "is below P (chains only; default 0 = never)",
                        d, "P");
    draft_temp_ = text("--draft-temp", draft_temp_text_,
                       "the temperature drafts are sampled at when --temp > 0 (default: --temp; "
                       "0 = the drafter's top tokens); exact at any value, it moves acceptance",
                       d, "T");
    ngram_min_ = text("--ngram-min,--prompt-lookup-min", ngram_min_text_,
                      "shortest n-gram prompt lookup matches (default 2)", d, "N");
    ngram_max_ = text("--ngram-max,--prompt-lookup-max", ngram_max_text_,
                      "longest n-gram prompt lookup matches (default 4)", d, "N");
    candidates_ =
        text("--ngram-candidates", candidates_text_,
             "verify up to N n-gram continuations at once, as a trie (default 1)", d, "N");
    tree_ = text("--tree", tree_text_,
                 "multi-candidate drafting: a token tree k1xk2x..., e.g. 4x2x2", d, "SHAPE");
    replacement_ =
        text("--replacement", replacement_text_,
             "with | without: how a sampled tree draws candidates (default with)", d, "R");
    heads_nodes_ = text("--heads-nodes", heads_nodes_text_,
                        "heads:FILE with --tree: at most N tree nodes, the most promising "
                        "(default 0 = the whole shape)",
                        d, "N");
    heads_expand_ = text("--heads-expand", heads_expand_text_,
                         "EAGLE-style heads with --tree: nodes expanded per level (default 4, "
                         "0 = all)",
                         d, "N");
    heads_candidates_ = text("--heads-candidates", heads_candidates_text_,
                             "sampled | top: heads' candidates under sampling, drawn from the "
                             "heads' distributions or their most likely tokens (default sampled)",
                             d, "C");
    verification_ = text("--verification", verification_text_,
                         "token | block | coupled | sample-match: how sampled drafts are "
                         "verified: token by token, as a block (Sun et al. 2025; never fewer "
                         "tokens per call), coupled (the same tokens as plain decoding with the "
                         "same seed, whatever the drafter), or llama.cpp's sample-and-match "
                         "(greedy drafts; the baseline); default block for sampled chains",
                         d, "V");
  }

  std::string help() const { return app_.help(); }

  cli_options parse(std::vector<std::string> args) {
    // llama.cpp's -md is a short name of two letters, which CLI11 (like getopt) cannot declare.
    args_ = args;
    for (auto& a : args)
      if (a == "-md") a = "--model-draft";
    spec_type(args);
    check_single_dash_words(args);
    std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 pops from the back
    cli_options c;
    try {
      app_.parse(reversed);
    } catch (const CLI::CallForHelp&) {
      c.help = help();
      return c;
    } catch (const CLI::ParseError& e) {
      throw usage_error(e.what());
    }
    finish(c);
    return c;
  }

 private:
  // llama.cpp's --spec-type T, rewritten to --draft before parsing: draft-simple (or draft) is
  // the draft model (-md PATH, else the default), ngram-* prompt lookup, none plain decoding.
  static void spec_type(std::vector<std::string>& args) {
    for (std::size_t i = 0; i < args.size();) {
      std::string value;
      std::size_t take = 0;
      if (args[i] == "--spec-type") {
        if (i + 1 >= args.size()) throw usage_error("--spec-type: needs a value");
        value = args[i + 1];
        take = 2;
      } else if (args[i].starts_with("--spec-type=")) {
        value = args[i].substr(12);
        take = 1;
      } else {
        ++i;
        continue;
      }
      std::vector<std::string> with;
      if (value.starts_with("ngram")) with = {"--draft", "ngram"};
      else if (value == "none") with = {"--draft", "none"};
      else if (value != "draft-simple" && value != "draft")
        throw usage_error("--spec-type '" + value +
                          "': specdec-generate knows draft-simple, ngram-* and none");
      args.erase(args.begin() + static_cast<std::ptrdiff_t>(i),
                 args.begin() + static_cast<std::ptrdiff_t>(i + take));
      args.insert(args.begin() + static_cast<std::ptrdiff_t>(i), with.begin(), with.end());
      i += with.size();  // past the replacement (none for draft-simple)
    }
  }

  void add_flag(const char* names, bool& slot, const char* what, const char* group) {
    all_.push_back(app_.add_flag(names, slot, what)->group(group));
  }

  // Every name a user may type, with its dashes.
  std::vector<std::string> spellings() const {
    std::vector<std::string> out{"-h", "--help", "-md", "--spec-type"};
    for (const CLI::Option* o : all_) {
      for (const auto& s : o->get_snames()) out.push_back("-" + s);
      for (const auto& l : o->get_lnames()) out.push_back("--" + l);
    }
    return out;
  }

  std::string nearest(std::string_view unknown) const {
    const std::string_view bare = unknown.substr(0, unknown.find('='));
    std::string best;
    std::size_t best_d = std::numeric_limits<std::size_t>::max();
    for (const auto& s : spellings()) {
      const std::size_t d = edit_distance(bare, s);
      if (d < best_d) best_d = d, best = s;
    }
    // A suggestion only when it is plausibly a typo: at most a third of the name differs (one
    // unknown letter after a dash is near every short flag, so it gets none).
    return bare.size() > 2 && best_d <= std::max<std::size_t>(2, bare.size() / 3) ? best
                                                                                  : std::string();
  }

  [[noreturn]] void unknown_option(const std::string& flag) const {
    const std::string guess = nearest(flag);
    throw usage_error("unknown option '" + flag + "'" +
                      (guess.empty() ? std::string() : " (did you mean " + guess + "?)"));
  }

  // CLI11 would read llama.cpp's multi-letter short flags (-ngl 99, -fa) as a known short flag
  // with an attached value (-n gl): refuse words of letters after one dash instead, unless they
  // are the value of the option before them.
  void check_single_dash_words(const std::vector<std::string>& args) const {
    for (std::size_t i = 0; i < args.size(); ++i) {
      const std::string& a = args[i];
      if (a == "--") break;
      const bool word = a.size() > 2 && a[0] == '-' && a[1] != '-' &&
                        std::all_of(a.begin() + 1, a.end(), [](char ch) {
                          return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z');
                        });
      if (word && !(i > 0 && takes_value(args[i - 1]))) unknown_option(a);
    }
  }

  bool takes_value(const std::string& a) const {
    if (a.find('=') != std::string::npos) return false;
    for (const CLI::Option* o : all_)
      if (o->get_type_size() != 0 && o->check_name(a)) return true;
    return false;
  }

  // The name the user typed for `o` (its last occurrence), for messages.
  std::string typed(const CLI::Option* o) const {
    for (auto it = args_.rbegin(); it != args_.rend(); ++it) {
      const std::string& a = *it;
      if (a == "-md") {
        if (o == model_draft_) return a;
        continue;
      }
      if (a.size() < 2 || a[0] != '-') continue;
      const std::string name = a.starts_with("--") ? a.substr(0, a.find('=')) : a.substr(0, 2);
      if (o->check_name(name)) return name;
    }
    return o->get_name(false, false);
  }

  [[noreturn]] void bad(const CLI::Option* o, const std::string& value,
                        const std::string& why) const {
    throw usage_error(typed(o) + " '" + value + "': " + why);
  }

  std::uint64_t whole(const CLI::Option* o, const std::string& text) const {
    std::uint64_t v = 0;
    const char* end = text.data() + text.size();
    const auto [ptr, ec] = std::from_chars(text.data(), end, v);
    if (ec == std::errc::result_out_of_range) bad(o, text, "is out of range");
    if (ec != std::errc() || ptr != end || text.empty()) bad(o, text, "is not a whole number");
    return v;
  }

  std::size_t whole_at_most(const CLI::Option* o, const std::string& text, std::uint64_t max,
                            const std::string& bound_name) const {
    std::uint64_t v = 0;
    const char* end = text.data() + text.size();
    const auto [ptr, ec] = std::from_chars(text.data(), end, v);
    if (ec == std::errc() && ptr == end && v > max)
      bad(o, text, "exceeds " + bound_name + " = " + std::to_string(max));
    if (ec == std::errc::result_out_of_range)
      bad(o, text, "exceeds " + bound_name + " = " + std::to_string(max));
    return static_cast<std::size_t>(whole(o, text));
  }

  float real(const CLI::Option* o, const std::string& text) const {
    float v = 0.0f;
    const char* end = text.data() + text.size();
    const auto [ptr, ec] = std::from_chars(text.data(), end, v);
    if (ec != std::errc() || ptr != end || text.empty()) bad(o, text, "is not a number");
    if (!std::isfinite(v)) bad(o, text, "is not a finite number");
    return v;
  }

  bool given(const CLI::Option* o) const { return o->count() > 0; }

  // Unless `allowed`, a usage error for the first of `flags` given: "<flag>: needs --draft
  // <draft>".
  void only_with(std::initializer_list<const CLI::Option*> flags, bool allowed,
                 const char* draft) const {
    if (allowed) return;
    for (const CLI::Option* o : flags)
      if (given(o)) throw usage_error(typed(o) + ": needs --draft " + draft);
  }

  void finish(cli_options& c) const {
    const auto extra = app_.remaining();
    if (!extra.empty()) {
      if (extra.front().size() > 1 && extra.front()[0] == '-') unknown_option(extra.front());
      throw usage_error("unexpected argument '" + extra.front() +
                        "' (a prompt goes after -p/--prompt)");
    }

    if (given(model_)) {
      if (model_text_.empty()) bad(model_, model_text_, "the path is empty");
      c.model = model_text_;
    }
    if (given(tokenizer_)) {
      if (tokenizer_text_.empty()) bad(tokenizer_, tokenizer_text_, "the path is empty");
      c.tokenizer = tokenizer_text_;
    } else if (given(model_) && c.model != cli_options{}.model) {
      c.tokenizer = (std::filesystem::path(c.model).parent_path() / "tokenizer.bin").string();
    }
    if (given(ctx_)) c.ctx_size = whole(ctx_, ctx_text_);
    if (given(threads_))
      c.threads = whole_at_most(threads_, threads_text_, max_threads, "the largest thread count");

    if (given(prompt_) && given(file_))
      throw usage_error(typed(prompt_) + " and " + typed(file_) + ": give one of them");
    if (given(prompt_)) {
      if (prompt_text_.empty()) bad(prompt_, prompt_text_, "the prompt is empty");
      c.prompt = prompt_text_;
    }
    if (given(file_)) {
      if (file_text_.empty()) bad(file_, file_text_, "the path is empty");
      c.prompt_file = file_text_;
    }
    if (given(n_)) {
      if (n_text_ == "-1") {
        c.n_predict = unlimited;
      } else {
        c.n_predict = whole(n_, n_text_);
        if (c.n_predict == 0) bad(n_, n_text_, "must be >= 1 (or -1: until the context is full)");
      }
    }
    c.quiet = quiet_;
    c.json = json_;
    c.compare_plain = compare_plain_;
    if (c.quiet && c.json) throw usage_error("--quiet and --json: give one of them");
    if (c.quiet && c.compare_plain)
      throw usage_error(
          "--quiet and --compare-plain: --quiet prints only the text, so the comparison would "
          "not be shown (use --json for both)");

    if (given(temp_)) c.sampling.temperature = real(temp_, temp_text_);
    if (c.sampling.temperature < 0.0f) bad(temp_, temp_text_, "must be >= 0 (0 = greedy)");
    if (given(top_k_)) c.sampling.top_k = static_cast<std::size_t>(whole(top_k_, top_k_text_));
    if (given(top_p_)) c.sampling.top_p = real(top_p_, top_p_text_);
    if (!(c.sampling.top_p > 0.0f && c.sampling.top_p <= 1.0f))
      bad(top_p_, top_p_text_, "must be in (0, 1]");
    if (given(min_p_)) c.sampling.min_p = real(min_p_, min_p_text_);
    if (!(c.sampling.min_p >= 0.0f && c.sampling.min_p < 1.0f))
      bad(min_p_, min_p_text_, "must be in [0, 1)");
    if (given(seed_)) c.sampling.seed = whole(seed_, seed_text_);
    if (given(repeat_penalty_)) c.penalties.repeat = real(repeat_penalty_, repeat_penalty_text_);
    if (!(c.penalties.repeat > 0.0f))
      bad(repeat_penalty_, repeat_penalty_text_, "must be > 0 (1 = off)");
    if (given(repeat_last_n_))
      c.penalties.last_n = static_cast<std::size_t>(whole(repeat_last_n_, repeat_last_n_text_));
    if (given(frequency_penalty_))
      c.penalties.frequency = real(frequency_penalty_, frequency_penalty_text_);
    if (given(presence_penalty_))
      c.penalties.presence = real(presence_penalty_, presence_penalty_text_);
    try {
      c.penalties.validate();
    } catch (const std::invalid_argument& e) {
      throw usage_error(std::string("penalties: ") + e.what());
    }
    if (c.penalties.repeat != 1.0f || c.penalties.frequency != 0.0f ||
        c.penalties.presence != 0.0f)
      c.sampling.processor = specdec::penalties(c.penalties);
    try {
      c.sampling.validate();  // the library's own rule, in case it is stricter than the above
    } catch (const std::invalid_argument& e) {
      throw usage_error(std::string("sampling: ") + e.what());
    }

    finish_draft(c);
  }

  void finish_draft(cli_options& c) const {
    if (given(draft_) && given(model_draft_))
      throw usage_error(typed(draft_) + " and " + typed(model_draft_) + ": give one of them");
    if (given(model_draft_)) {
      if (model_draft_text_.empty()) bad(model_draft_, model_draft_text_, "the path is empty");
      c.draft_text = "model:" + model_draft_text_;
    } else if (given(draft_)) {
      c.draft_text = draft_text_;
    }
    c.ngram_first = c.draft_text.starts_with("ngram+");
    const std::string d = c.draft_text.substr(c.ngram_first ? 6 : 0);
    const CLI::Option* draft_flag = given(model_draft_) ? model_draft_ : draft_;
    if (c.ngram_first && !d.starts_with("layers:") && !d.starts_with("model:"))
      bad(draft_, c.draft_text, "ngram+ takes layers:L or model:PATH after it");
    if (d == "none") {
      c.draft = draft_kind::none;
    } else if (d == "ngram") {
      c.draft = draft_kind::ngram;
    } else if (d.starts_with("layers:")) {
      c.draft = draft_kind::layers;
      const std::string l = d.substr(7);
      std::uint64_t v = 0;
      const auto [ptr, ec] = std::from_chars(l.data(), l.data() + l.size(), v);
      if (ec != std::errc() || ptr != l.data() + l.size() || l.empty())
        bad(draft_, c.draft_text, "L in layers:L is not a whole number");
      if (v == 0) bad(draft_, c.draft_text, "L in layers:L must be >= 1");
      c.draft_layers = static_cast<std::size_t>(v);  // above the layer count: refused on loading
    } else if (d.starts_with("heads:")) {
      c.draft = draft_kind::heads;
      c.draft_heads = d.substr(6);
      if (c.draft_heads.empty()) bad(draft_, c.draft_text, "the path in heads:FILE is empty");
    } else if (d.starts_with("model:")) {
      c.draft = draft_kind::model;
      c.draft_model = d.substr(6);
      if (c.draft_model.empty()) bad(draft_flag, c.draft_text, "the path in model:PATH is empty");
    } else {
      bad(draft_, c.draft_text, "is not none, layers:L, model:PATH, ngram or heads:FILE");
    }
    if (c.draft != draft_kind::layers) c.draft_layers = 0;
    only_with({heads_nodes_, heads_expand_, heads_candidates_}, c.draft == draft_kind::heads,
              "heads:FILE");
    if (given(heads_nodes_))
      c.heads_nodes = whole_at_most(heads_nodes_, heads_nodes_text_, specdec::max_tree_nodes,
                                    "the tree bound max_tree_nodes");
    if (given(heads_expand_))
      c.heads_expand = whole_at_most(heads_expand_, heads_expand_text_, specdec::max_tree_nodes,
                                     "the tree bound max_tree_nodes");
    if (given(heads_candidates_)) {
      if (heads_candidates_text_ == "sampled")
        c.heads_sampled = true;
      else if (heads_candidates_text_ == "top")
        c.heads_sampled = false;
      else
        bad(heads_candidates_, heads_candidates_text_, "is not sampled or top");
    }

    if (given(k_) && k_text_ == "auto") {
      if (c.draft == draft_kind::none) bad(k_, k_text_, "needs a drafter (--draft)");
      c.k_auto = true;
      c.k = 8;  // the longest chain the policy plans (speed_policy's max_depth)
    } else if (given(k_)) {
      c.k = whole_at_most(k_, k_text_, max_draft_length, "the largest draft (max_draft_length)");
    }
    if (given(draft_min_)) {
      c.draft_min = whole(draft_min_, draft_min_text_);
      if (c.draft_min > c.k)
        bad(draft_min_, draft_min_text_,
            "exceeds the largest draft (" + typed(k_) + " " + std::to_string(c.k) + ")");
    }
    only_with({draft_p_min_}, c.draft == draft_kind::layers || c.draft == draft_kind::model,
              "layers:L or model:PATH (a draft model)");
    if (given(draft_p_min_)) {
      c.draft_p_min = real(draft_p_min_, draft_p_min_text_);
      if (!(c.draft_p_min >= 0.0f && c.draft_p_min <= 1.0f))
        bad(draft_p_min_, draft_p_min_text_, "must be in [0, 1]");
    }

    if (given(draft_temp_)) {
      c.draft_temperature = real(draft_temp_, draft_temp_text_);
      if (!(*c.draft_temperature >= 0.0f))
        bad(draft_temp_, draft_temp_text_, "must be >= 0 (0 = the drafter's top tokens)");
    }

    only_with({ngram_min_, ngram_max_, candidates_},
              c.draft == draft_kind::ngram || c.ngram_first, "ngram (prompt lookup)");
    if (given(ngram_min_)) c.ngram.min_ngram = whole(ngram_min_, ngram_min_text_);
    if (given(ngram_max_)) c.ngram.max_ngram = whole(ngram_max_, ngram_max_text_);
    c.ngram.max_draft = std::max<std::size_t>(c.k, 1);
    try {
      c.ngram.validate();
    } catch (const std::invalid_argument& e) {
      const std::string what = e.what();
      const bool about_min = what.starts_with("ngram_options.min_ngram");
      const CLI::Option* o = about_min ? ngram_min_ : ngram_max_;
      throw usage_error(
          typed(o) + " '" +
          (about_min ? std::to_string(c.ngram.min_ngram) : std::to_string(c.ngram.max_ngram)) +
          "': " + what);
    }

    if (given(tree_)) {
      try {
        c.tree = specdec::parse_branching(tree_text_);
      } catch (const std::invalid_argument& e) {
        bad(tree_, tree_text_, e.what());
      }
    }
    if (given(replacement_)) {
      if (replacement_text_ == "with")
        c.draw = specdec::candidate_draw::iid;
      else if (replacement_text_ == "without")
        c.draw = specdec::candidate_draw::without_replacement;
      else
        bad(replacement_, replacement_text_, "is not with or without");
    }
    if (given(verification_)) {
      if (verification_text_ == "token")
        c.verification = specdec::chain_verification::token;
      else if (verification_text_ == "block")
        c.verification = specdec::chain_verification::block;
      else if (verification_text_ == "coupled")
        c.verification = specdec::chain_verification::coupled;
      else if (verification_text_ == "sample-match")
        c.verification = specdec::chain_verification::sample_match;
      else
        bad(verification_, verification_text_, "is not token, block, coupled or sample-match");
    }
    if (given(candidates_)) {
      c.ngram_candidates = whole(candidates_, candidates_text_);
      if (c.ngram_candidates == 0) bad(candidates_, candidates_text_, "must be >= 1");
      const std::size_t depth = std::max<std::size_t>(c.k, 1);
      if (c.ngram_candidates > specdec::max_tree_nodes / depth)
        bad(candidates_, candidates_text_,
            "times the draft length " + std::to_string(depth) +
                " exceeds the tree bound max_tree_nodes = " +
                std::to_string(specdec::max_tree_nodes));
    }
    if (c.ngram_candidates > 1) {
      if (!c.tree.empty()) throw usage_error("--ngram-candidates and --tree: give one of them");
      c.tree.assign(std::max<std::size_t>(c.k, 1), 1);  // N candidates of up to k tokens
      c.tree[0] = c.ngram_candidates;
    }
    if (c.k_auto && !c.tree.empty())
      throw usage_error(typed(k_) + " auto: plans its own shapes; --tree and --ngram-candidates "
                        "fix one");
    if (c.draft == draft_kind::none && !c.tree.empty())
      throw usage_error(typed(tree_) + ": needs a drafter (--draft layers:L, model:PATH or ngram)");
    if (given(verification_) && c.verification == specdec::chain_verification::block &&
        !c.tree.empty())
      throw usage_error(typed(verification_) +
                        " block: applies to chains of drafts, not to --tree or --ngram-candidates");
    // Block verification keeps a chain's law and never accepts fewer tokens per call (measured
    // on EAGLE-style heads at temperature 0.8: more tokens per call); greedy it is exact match
    // either way. Trees use multi-candidate verification.
    if (!given(verification_) && c.tree.empty() && c.sampling.temperature > 0.0f)
      c.verification = specdec::chain_verification::block;
    if (c.ngram_first && !c.tree.empty())
      throw usage_error(typed(draft_) + " " + c.draft_text +
                        ": drafts chains, not --tree or --ngram-candidates");
    if (c.draft_min > 0 && !c.tree.empty())
      throw usage_error(typed(draft_min_) +
                        ": applies to chains of drafts, not to --tree or --ngram-candidates");
    if (given(draft_p_min_) && !c.tree.empty())
      throw usage_error(typed(draft_p_min_) + ": applies to chains of drafts, not to --tree");
  }

  CLI::App app_{"specdec-generate", "specdec-generate"};
  std::vector<CLI::Option*> all_;
  std::vector<std::string> args_;
  CLI::Option *model_, *tokenizer_, *ctx_, *threads_, *prompt_, *file_, *n_, *temp_, *top_k_,
      *top_p_, *min_p_, *seed_, *draft_, *model_draft_, *k_, *draft_min_, *draft_p_min_, *ngram_min_, *ngram_max_,
      *candidates_, *tree_, *replacement_, *verification_, *heads_nodes_, *heads_expand_,
      *heads_candidates_, *draft_temp_, *repeat_penalty_, *repeat_last_n_, *frequency_penalty_,
      *presence_penalty_;
  std::string model_text_, tokenizer_text_, ctx_text_, threads_text_, prompt_text_, file_text_,
      n_text_, temp_text_, top_k_text_, top_p_text_, min_p_text_, seed_text_, draft_text_,
      model_draft_text_, k_text_, draft_min_text_, draft_p_min_text_, ngram_min_text_, ngram_max_text_,
      candidates_text_, tree_text_, replacement_text_, verification_text_, heads_nodes_text_,
      heads_expand_text_, heads_candidates_text_, draft_temp_text_, repeat_penalty_text_, repeat_last_n_text_,
      frequency_penalty_text_, presence_penalty_text_;
  bool quiet_ = false, json_ = false, compare_plain_ = false;
};

}  // namespace detail

/// Parses specdec-generate's arguments (without the program name). Throws usage_error naming the
/// flag and the value; returns options with `help` set when --help was given. Not thread-safe
/// only in the sense that each call builds its own parser; calls do not share state.
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
