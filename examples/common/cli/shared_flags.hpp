// common/cli/shared_flags.hpp - the flags specdec-generate and specdec-llama share: declared
// once, spelled and defaulted as llama.cpp's tools spell and default them (docs/command-line.md).
//
//   sampling   --temp (0.8) --top-k (40) --top-p (0.95) --min-p (0.05) -s/--seed (random)
//   request    -p -f -n (-1: until end of text or a full context) -c -t -ngl --json
//              --compare-plain
//   drafting   --draft (values per program) -md --spec-type -k/--draft-max (auto with a drafter)
//              --draft-min --draft-p-min --tree --verification
//
// No drafter unless asked for (--draft, -md, --spec-type): llama.cpp does not speculate
// unprompted. With one and no -k, K is the speed policy's (-k auto), unless --tree (or another
// program flag) fixes the shape. Each program declares its own flags beside these and reads the
// drafter named in `drafter` in its own terms.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <random>
#include <specdec/decode/options.hpp>
#include <specdec/math/sampling_params.hpp>
#include <specdec/tree/tree_shape.hpp>
#include <string>
#include <vector>

#include "common/cli/flag_parser.hpp"
#include "common/cli/parse_number.hpp"

namespace specdec::cli {

/// llama.cpp's sampling defaults (common/common.h: temp 0.8, top_k 40, top_p 0.95, min_p 0.05;
/// the seed is drawn when not given).
inline specdec::sampling_params llama_sampling_defaults() {
  return {.temperature = 0.8f, .top_k = 40, .top_p = 0.95f, .min_p = 0.05f};
}

/// The draft length used when a drafter is given with a fixed shape (--tree) but no -k.
inline constexpr std::size_t fallback_draft_length = 4;

/// What the shared flags asked for.
struct shared_options {
  std::string prompt;                ///< -p (a program may default it)
  std::string prompt_file;           ///< -f (the program reads it)
  std::size_t n_predict = unlimited; ///< -n; -1 (unlimited): until end of text or a full context
  std::size_t ctx_size = 0;          ///< -c; 0 = the model's own context
  std::size_t threads = 0;           ///< -t; 0 = the program's default (see its help)
  std::optional<long long> n_gpu_layers;  ///< -ngl N; auto = -1, all = -2; none = not given
  specdec::sampling_params sampling = llama_sampling_defaults();
  bool seed_given = false;           ///< false: sampling.seed was drawn (printed for repeats)
  /// Who drafts, as asked (a program reads it in its own terms): "" (nobody asked: plain decoding), "none", "model" (-md or
  /// --spec-type draft-simple; the path in draft_model), "ngram" (--spec-type ngram-*), or the
  /// text of --draft for the program to read.
  std::string drafter;
  std::string draft_model;           ///< -md PATH
  std::optional<std::size_t> draft_max;  ///< -k N; none: auto or not given (see k_auto)
  bool k_auto = false;               ///< -k auto, or a drafter without -k and no fixed shape
  std::size_t draft_min = 0;         ///< --draft-min: shorter drafts are not verified
  float draft_p_min = 0.0f;          ///< --draft-p-min: a draft model stops below it
  std::vector<std::size_t> tree;     ///< --tree k1xk2x...; empty = chains
  specdec::verification_rule verification = specdec::verification_rule::token;
  bool verification_given = false;
  bool json = false;
  bool compare_plain = false;
};

/// The shared flags on a flag_parser: declare() them, parse, then finish() them.
class shared_flags {
 public:
  /// What differs between the programs in the shared flags' help.
  struct texts {
    std::string draft;       ///< --draft's values
    std::string threads;     ///< -t's default
    std::string prompt;      ///< -p's default
    std::string ngl;         ///< what -ngl does here
    std::size_t max_k = 1024;  ///< largest -k
    std::string max_k_name = "the largest draft";  ///< its name in messages
  };

  void declare(flag_parser& p, const texts& t) {
    max_k_ = t.max_k;
    max_k_name_ = t.max_k_name;
    p.add_spelling("--spec-type");
    const char* r = "Request";
    prompt_ = p.text("-p,--prompt", prompt_text_, "prompt" + t.prompt, r);
    file_ = p.text("-f,--file", file_text_,
                   "read the prompt from a file (one trailing newline dropped)", r, "PATH");
    n_ = p.text("-n,--n-predict", n_text_,
                "tokens to generate, -1 = until end of text or a full context (default -1)", r,
                "N");
    ctx_ = p.text("-c,--ctx-size", ctx_text_,
                  "context in tokens, prompt included (default 0 = the model's)", r, "N");
    threads_ = p.text("-t,--threads", threads_text_, "threads (default " + t.threads + ")", r,
                      "N");
    ngl_ = p.text("--n-gpu-layers,--gpu-layers", ngl_text_,
                  "layers to offload to the GPU (N, auto or all), also -ngl: " + t.ngl, r,
                  "N");
    p.flag("--json", json_,
           "print one JSON object at the end: request, options (the seed used), text and every "
           "statistic",
           r);
    p.flag("--compare-plain", compare_plain_,
           "also decode the same request without a drafter; print both speeds, their ratio and, "
           "when plain decoding's tokens are promised (greedy, coupled, sample-match), whether "
           "the outputs agree",
           r);

    const char* s = "Sampling";
    temp_ = p.text("--temp,--temperature", temp_text_, "temperature, 0 = greedy (default 0.8)",
                   s, "T");
    top_k_ = p.text("--top-k", top_k_text_, "keep the K most likely tokens (default 40, 0 = off)",
                    s, "K");
    top_p_ = p.text("--top-p", top_p_text_, "nucleus sampling, in (0, 1] (default 0.95, 1 = off)",
                    s, "P");
    min_p_ = p.text("--min-p", min_p_text_,
                    "drop tokens below P x the most likely, in [0, 1) (default 0.05, 0 = off)", s,
                    "P");
    seed_ = p.text("-s,--seed", seed_text_,
                   "random seed (default -1: drawn at random and printed, so the run can be "
                   "repeated with -s)",
                   s, "S");

    const char* d = "Drafting (none unless asked for)";
    draft_ = p.text("--draft", draft_text_, t.draft, d, "D");
    spec_type_ = p.text("--spec-type", spec_type_text_,
                        "llama.cpp's drafter names: none | draft-simple (the draft model, -md) | "
                        "ngram-* (prompt lookup: ngram-simple, ngram-cache, ngram-mod, ...)",
                        d, "TYPE");
    model_draft_ = p.text("--model-draft,--spec-draft-model", model_draft_text_,
                          "a draft model, also -md (its vocabulary must be the model's)", d,
                          "PATH");
    k_ = p.text("-k,--draft-max,--spec-draft-n-max,--num-speculative-tokens", k_text_,
                "draft tokens per target call, at most " + std::to_string(t.max_k) +
                    "; auto (the default with a drafter): the speed policy measures the model's "
                    "cost curve first, then plans K, a tree or a plain step before every step",
                d, "K");
    draft_min_ = p.text("--draft-min,--spec-draft-n-min", draft_min_text_,
                        "do not verify drafts shorter than N tokens: decode one token plainly "
                        "instead (chains only; default 0)",
                        d, "N");
    draft_p_min_ = p.text("--draft-p-min,--spec-draft-p-min", draft_p_min_text_,
                          "a model draft stops at the first position whose top draft "
                          "probability is below P (chains only; default 0 = never)",
                          d, "P");
    tree_ = p.text("--tree", tree_text_,
                   "a token tree per step, branching per level, e.g. 4x2x2 (a fixed shape)", d,
                   "SHAPE");
    verification_ = p.text("--verification", verification_text_,
                           "token | block | coupled | sample-match: how sampled drafts are "
                           "verified: token by token, as a block (chains), coupled (plain "
                           "decoding's tokens for the seed, whatever the drafter), or llama.cpp's "
                           "sample-and-match",
                           d, "V");
  }

  /// Converts and checks everything that needs no other flag's meaning; the drafter's kind is
  /// the program's to read from `drafter` (then call finish_k()).
  void finish(const flag_parser& p, shared_options& c) const {
    if (p.given(prompt_) && p.given(file_))
      throw usage_error(p.typed(prompt_) + " and " + p.typed(file_) + ": give one of them");
    if (p.given(prompt_)) {
      if (prompt_text_.empty()) p.bad(prompt_, prompt_text_, "the prompt is empty");
      c.prompt = prompt_text_;
    }
    if (p.given(file_)) {
      if (file_text_.empty()) p.bad(file_, file_text_, "the path is empty");
      c.prompt_file = file_text_;
    }
    if (p.given(n_)) {
      if (n_text_ == "-1") {
        c.n_predict = unlimited;
      } else {
        c.n_predict = p.whole(n_, n_text_);
        if (c.n_predict == 0)
          p.bad(n_, n_text_, "must be >= 1 (or -1: until end of text or a full context)");
      }
    }
    if (p.given(ctx_)) c.ctx_size = p.whole(ctx_, ctx_text_);
    if (p.given(threads_))
      c.threads = p.whole_at_most(threads_, threads_text_, 256, "the largest thread count");
    if (p.given(ngl_)) {  // llama.cpp's: N layers, auto (-1) or all (<= -2)
      long long v = 0;
      if (ngl_text_ == "auto") v = -1;
      else if (ngl_text_ == "all") v = -2;
      else if (parse_number(ngl_text_, v) != number_read::ok)
        p.bad(ngl_, ngl_text_, "is not a whole number, auto or all");
      c.n_gpu_layers = v;
    }
    c.json = json_;
    c.compare_plain = compare_plain_;

    if (p.given(temp_)) c.sampling.temperature = p.real(temp_, temp_text_);
    if (c.sampling.temperature < 0.0f) p.bad(temp_, temp_text_, "must be >= 0 (0 = greedy)");
    if (p.given(top_k_)) c.sampling.top_k = static_cast<std::size_t>(p.whole(top_k_, top_k_text_));
    if (p.given(top_p_)) c.sampling.top_p = p.real(top_p_, top_p_text_);
    if (!(c.sampling.top_p > 0.0f && c.sampling.top_p <= 1.0f))
      p.bad(top_p_, top_p_text_, "must be in (0, 1]");
    if (p.given(min_p_)) c.sampling.min_p = p.real(min_p_, min_p_text_);
    if (!(c.sampling.min_p >= 0.0f && c.sampling.min_p < 1.0f))
      p.bad(min_p_, min_p_text_, "must be in [0, 1)");
    c.seed_given = p.given(seed_) && seed_text_ != "-1";
    if (c.seed_given) c.sampling.seed = p.whole(seed_, seed_text_);

    // Who drafts.
    if (p.given(spec_type_) && p.given(draft_))
      throw usage_error(p.typed(spec_type_) + " and " + p.typed(draft_) + ": give one of them");
    if (p.given(model_draft_)) {
      if (model_draft_text_.empty()) p.bad(model_draft_, model_draft_text_, "the path is empty");
      c.draft_model = model_draft_text_;
      c.drafter = "model";
    }
    if (p.given(draft_)) c.drafter = draft_text_;
    if (p.given(spec_type_)) {
      const std::string& t = spec_type_text_;
      if (t.starts_with("ngram")) {
        c.drafter = "ngram";
      } else if (t == "none") {
        c.drafter = "none";
      } else if (t == "draft-simple" || t == "draft") {
        if (!p.given(model_draft_)) p.bad(spec_type_, t, "needs a draft model (-md PATH)");
        c.drafter = "model";
      } else {
        p.bad(spec_type_, t, "is not none, draft-simple or ngram-*");
      }
    }

    if (p.given(k_) && k_text_ == "auto") c.k_auto = true;
    else if (p.given(k_))
      c.draft_max = p.whole_at_most(k_, k_text_, max_k_, max_k_name_);
    if (p.given(draft_min_)) c.draft_min = p.whole(draft_min_, draft_min_text_);
    if (p.given(draft_p_min_)) {
      c.draft_p_min = p.real(draft_p_min_, draft_p_min_text_);
      if (!(c.draft_p_min >= 0.0f && c.draft_p_min <= 1.0f))
        p.bad(draft_p_min_, draft_p_min_text_, "must be in [0, 1]");
    }
    if (p.given(tree_)) {
      try {
        c.tree = specdec::parse_branching(tree_text_);
      } catch (const std::invalid_argument& e) {
        p.bad(tree_, tree_text_, e.what());
      }
    }
    c.verification_given = p.given(verification_);
    if (c.verification_given) {
      if (verification_text_ == "token")
        c.verification = specdec::verification_rule::token;
      else if (verification_text_ == "block")
        c.verification = specdec::verification_rule::block;
      else if (verification_text_ == "coupled")
        c.verification = specdec::verification_rule::coupled;
      else if (verification_text_ == "sample-match")
        c.verification = specdec::verification_rule::sample_match;
      else
        p.bad(verification_, verification_text_, "is not token, block, coupled or sample-match");
    }
  }

  /// K once the program knows whether a drafter runs (`drafting`) and whether a program flag
  /// fixes the shape (`fixed_shape`; --tree does). Without a drafter, -k above 0 is refused (it
  /// would silently do nothing); with one, no -k means the speed policy unless the shape is
  /// fixed (then fallback_draft_length). Returns the chain length in force (0 without a
  /// drafter; with auto, `auto_k`, the longest chain the policy plans).
  std::size_t finish_k(const flag_parser& p, shared_options& c, bool drafting, bool fixed_shape,
                       std::size_t auto_k) const {
    if (!drafting) {
      if (c.k_auto || c.draft_max.value_or(0) > 0)
        p.bad(k_, k_text_,
              "needs a drafter (--draft, -md or --spec-type): without one nothing is drafted");
      c.k_auto = false;
      return 0;
    }
    if (c.k_auto && fixed_shape)
      throw usage_error(p.typed(k_) + " auto: plans its own shapes; " + p.typed(tree_) +
                        " fixes one");
    if (!c.draft_max && !c.k_auto && !fixed_shape) c.k_auto = true;
    if (c.k_auto) return auto_k;
    return c.draft_max.value_or(fallback_draft_length);
  }

  /// A seed for runs that did not give one: drawn from std::random_device (llama.cpp draws
  /// LLAMA_DEFAULT_SEED's replacement the same way). Called by the programs, not the parser, so
  /// parsing stays free of side effects.
  static void draw_seed(shared_options& c) {
    if (c.seed_given) return;
    std::random_device rd;
    c.sampling.seed = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
  }

  const CLI::Option* k_flag() const { return k_; }
  const CLI::Option* tree_flag() const { return tree_; }
  const CLI::Option* draft_flag() const { return draft_; }
  const CLI::Option* model_draft_flag() const { return model_draft_; }
  const CLI::Option* draft_min_flag() const { return draft_min_; }
  const CLI::Option* draft_p_min_flag() const { return draft_p_min_; }
  const CLI::Option* verification_flag() const { return verification_; }
  const CLI::Option* prompt_flag() const { return prompt_; }
  const CLI::Option* ngl_flag() const { return ngl_; }

 private:
  std::size_t max_k_ = 1024;
  std::string max_k_name_;
  CLI::Option *prompt_ = nullptr, *file_ = nullptr, *n_ = nullptr, *ctx_ = nullptr,
              *threads_ = nullptr, *ngl_ = nullptr, *temp_ = nullptr, *top_k_ = nullptr,
              *top_p_ = nullptr, *min_p_ = nullptr, *seed_ = nullptr, *draft_ = nullptr,
              *spec_type_ = nullptr, *model_draft_ = nullptr, *k_ = nullptr,
              *draft_min_ = nullptr, *draft_p_min_ = nullptr, *tree_ = nullptr,
              *verification_ = nullptr;
  std::string prompt_text_, file_text_, n_text_, ctx_text_, threads_text_, ngl_text_, temp_text_,
      top_k_text_, top_p_text_, min_p_text_, seed_text_, draft_text_, spec_type_text_,
      model_draft_text_, k_text_, draft_min_text_, draft_p_min_text_, tree_text_,
      verification_text_;
  bool json_ = false, compare_plain_ = false;
};

/// llama.cpp's multi-letter single-dash spellings of the shared flags.
inline std::vector<std::pair<std::string, std::string>> shared_short_words() {
  return {{"-md", "--model-draft"}, {"-ngl", "--n-gpu-layers"}};
}

}  // namespace specdec::cli
