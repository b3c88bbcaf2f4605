// specdec-generate: speculative decoding on a real llama2.c checkpoint, from the command line.
//
// Shows the library end to end on a real transformer: the reference adapter (model.hpp), a
// drafter chosen by flag (none, a layer-skip view of the same weights, a second checkpoint, or
// prompt lookup), streaming output, and the decoder's statistics.
//
//   specdec-generate --prompt "I dreamed" -n 64 --draft layers:2 -k 4 --temperature 0
//
// Exit status: 0 on success; 2 for a bad flag or value (checked before anything is loaded);
// 1 when a file cannot be read or the model or decoder refuses a value.
#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <iterator>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <specdec/specdec.hpp>

#include "llama2c/model.hpp"
#include "llama2c/tokenizer.hpp"

#ifndef SPECDEC_MODELS_DIR
#define SPECDEC_MODELS_DIR "../shared/models"
#endif

namespace {

namespace l2 = specdec::llama2c;

struct cli {
  std::string model = std::string(SPECDEC_MODELS_DIR) + "/aidreams260K.bin";
  std::string tokenizer = std::string(SPECDEC_MODELS_DIR) + "/aidreams260K.tok512.bin";
  std::string prompt = "I dreamed";
  std::size_t steps = 64;
  specdec::sampling_params sampling{.temperature = 0.0f};
  std::string draft = "layers:3";  // none | ngram | layers:L | model:PATH, checked by parse()
  std::size_t draft_layers = 0;     // L of layers:L
  std::string draft_model;          // PATH of model:PATH
  std::size_t k = 4;
  std::size_t ngram_min = 2, ngram_max = 4;
  std::size_t ngram_candidates = 1;
  std::vector<std::size_t> tree;  // empty: a chain of k drafts
  specdec::candidate_draw draw = specdec::candidate_draw::iid;
  bool quiet = false;
  std::size_t threads = 0;     // 0 = the hardware's
  bool compare_plain = false;  // also time plain decoding of the same request
};

const char* const usage =
    "usage: specdec-generate [options]\n"
    "  --model PATH         llama2.c checkpoint (default: " SPECDEC_MODELS_DIR "/aidreams260K.bin)\n"
    "  --tokenizer PATH     its tokenizer (default: aidreams260K.tok512.bin for the default\n"
    "                       model, tokenizer.bin beside any other --model)\n"
    "  --prompt TEXT        prompt (default: \"I dreamed\")\n"
    "  -n N                 new tokens to generate (default 64)\n"
    "  --temperature T      0 = greedy (default 0)\n"
    "  --top-p P            nucleus sampling, (0, 1] (default 1 = off)\n"
    "  --top-k K            keep the K most likely tokens (default 0 = off)\n"
    "  --min-p P            drop tokens below P x the most likely (default 0 = off)\n"
    "  --seed S             random seed (default 0)\n"
    "  --draft D            none | layers:L | model:PATH | ngram (default layers:3)\n"
    "  -k K                 draft tokens per target call (default 4)\n"
    "  --threads N          threads for the target and the draft (default 0 = all cores)\n"
    "  --compare-plain      also run plain decoding of the same request and print both times\n"
    "                       and their ratio (and, when greedy, whether the outputs agree)\n"
    "  --ngram-min N        shortest n-gram prompt lookup matches (default 2)\n"
    "  --ngram-max N        longest n-gram prompt lookup matches (default 4)\n"
    "  --ngram-candidates N verify up to N n-gram continuations at once, as a trie (default 1)\n"
    "  --tree SHAPE         multi-candidate drafting: a token tree k1xk2x..., e.g. 4x2x2\n"
    "  --replacement R      with | without: how a sampled tree draws candidates (default with)\n"
    "  --quiet              print only the statistics\n"
    "exit status: 0 done; 2 bad flag or value; 1 a file cannot be read or the model or decoder\n"
    "refuses a value (e.g. layers:L above the model's layer count, a prompt past its context)\n";

[[noreturn]] void fail(const std::string& message) {
  std::fprintf(stderr, "specdec-generate: %s\n%s", message.c_str(), usage);
  std::exit(2);
}

template <class T>
T number(std::string_view flag, std::string_view text) {
  T value{};
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size())
    fail(std::string(flag) + ": '" + std::string(text) + "' is not a valid number");
  return value;
}

cli parse(int argc, char** argv) {
  cli c;
  bool tokenizer_given = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      std::fputs(usage, stdout);
      std::exit(0);
    }
    if (flag == "--quiet") {
      c.quiet = true;
      continue;
    }
    if (flag == "--compare-plain") {
      c.compare_plain = true;
      continue;
    }
    constexpr std::string_view with_value[] = {
        "--model", "--tokenizer", "--prompt", "-n", "--temperature", "--top-p", "--top-k",
        "--min-p", "--seed", "--draft", "-k", "--ngram-min", "--ngram-max", "--ngram-candidates",
        "--tree", "--replacement", "--threads"};
    if (std::find(std::begin(with_value), std::end(with_value), flag) == std::end(with_value))
      fail("unknown option " + std::string(flag));
    if (i + 1 >= argc) fail(std::string(flag) + ": missing value");
    const std::string_view value = argv[++i];
    if (flag == "--model") c.model = value;
    else if (flag == "--tokenizer") c.tokenizer = value, tokenizer_given = true;
    else if (flag == "--prompt") c.prompt = value;
    else if (flag == "-n") c.steps = number<std::size_t>(flag, value);
    else if (flag == "--temperature") c.sampling.temperature = number<float>(flag, value);
    else if (flag == "--top-p") c.sampling.top_p = number<float>(flag, value);
    else if (flag == "--top-k") c.sampling.top_k = number<std::size_t>(flag, value);
    else if (flag == "--min-p") c.sampling.min_p = number<float>(flag, value);
    else if (flag == "--seed") c.sampling.seed = number<std::uint64_t>(flag, value);
    else if (flag == "--draft") c.draft = value;
    else if (flag == "-k") c.k = number<std::size_t>(flag, value);
    else if (flag == "--threads") c.threads = number<std::size_t>(flag, value);
    else if (flag == "--ngram-min") c.ngram_min = number<std::size_t>(flag, value);
    else if (flag == "--ngram-max") c.ngram_max = number<std::size_t>(flag, value);
    else if (flag == "--ngram-candidates") c.ngram_candidates = number<std::size_t>(flag, value);
    else if (flag == "--tree") {
      try {
        c.tree = specdec::parse_branching(value);
      } catch (const std::invalid_argument& e) {
        fail(std::string("--tree: ") + e.what());
      }
    } else if (flag == "--replacement") {
      if (value == "with") c.draw = specdec::candidate_draw::iid;
      else if (value == "without") c.draw = specdec::candidate_draw::without_replacement;
      else fail("--replacement: '" + std::string(value) + "' is not with or without");
    }
  }
  if (!tokenizer_given && c.model != cli{}.model) {
    // A custom checkpoint: look for tokenizer.bin beside it.
    c.tokenizer = (std::filesystem::path(c.model).parent_path() / "tokenizer.bin").string();
  }
  if (c.steps == 0) fail("-n: must be >= 1");
  if (c.draft.starts_with("layers:")) {
    c.draft_layers = number<std::size_t>("--draft layers", std::string_view(c.draft).substr(7));
    if (c.draft_layers == 0) fail("--draft layers:L: L must be >= 1");
  } else if (c.draft.starts_with("model:")) {
    c.draft_model = c.draft.substr(6);
    if (c.draft_model.empty()) fail("--draft model:PATH: the path is empty");
  } else if (c.draft != "none" && c.draft != "ngram") {
    fail("--draft: '" + c.draft + "' is not none, layers:L, model:PATH or ngram");
  }
  if (c.threads > 256) fail("--threads: " + std::to_string(c.threads) + " exceeds 256");
  if (c.ngram_candidates == 0) fail("--ngram-candidates: must be >= 1");
  if (c.ngram_candidates > 1) {
    if (c.draft != "ngram") fail("--ngram-candidates: needs --draft ngram");
    if (!c.tree.empty()) fail("--ngram-candidates and --tree: give one of them");
    c.tree.assign(std::max<std::size_t>(c.k, 1), 1);  // N candidates of up to k tokens
    c.tree[0] = c.ngram_candidates;
  }
  if (c.draft == "none" && !c.tree.empty())
    fail("--tree: needs a drafter (--draft layers:L, model:PATH or ngram)");
  try {
    c.sampling.validate();
  } catch (const std::invalid_argument& e) {
    fail(e.what());
  }
  return c;
}

const char* reason_text(specdec::stop_reason r) {
  switch (r) {
    case specdec::stop_reason::max_new_tokens: return "the token limit (-n)";
    case specdec::stop_reason::stop_token: return "an end-of-text token";
    case specdec::stop_reason::callback: return "the caller";
    case specdec::stop_reason::context_full: return "a full context (the model's seq_len)";
  }
  return "?";
}

template <class Drafter>
int run(const cli& c, l2::model& target, Drafter& drafter, const l2::tokenizer& tok) {
  specdec::speculative_decoder decoder(target, drafter);
  const auto prompt = tok.encode(c.prompt);
  specdec::generate_options o;
  o.max_new_tokens = c.steps;
  o.draft_length = c.k;
  o.sampling = c.sampling;
  o.stop_tokens = {l2::tokenizer::bos_id, l2::tokenizer::eos_id};
  o.tree = c.tree;
  o.tree_draw = c.draw;
  specdec::token_id prev = prompt.back();
  if (!c.quiet) {
    std::printf("%s", tok.decode(prompt).c_str());
    o.on_token = [&](specdec::token_id t) {
      std::printf("%s", tok.decode(prev, t).c_str());
      std::fflush(stdout);
      prev = t;
      return true;
    };
  }
  const auto r = decoder.generate(prompt, o);
  std::printf("\n\n%s", r.stats.summary().c_str());
  if (r.stats.draft_model_calls)
    std::printf("draft model calls: %zu\n", r.stats.draft_model_calls);
  std::printf("stopped at %s\n", reason_text(r.reason));
  if (c.compare_plain) {
    // The same request without a drafter, on the same target (its cache is refilled).
    o.on_token = nullptr;
    const auto plain = specdec::generate_autoregressive(target, prompt, o);
    const auto decode_s = [](const specdec::decode_stats& s) {
      return s.total_seconds - s.prefill_seconds;
    };
    std::printf("plain decoding: %zu tokens in %.3f s (%.1f tokens/s)\n",
                plain.stats.generated_tokens, decode_s(plain.stats),
                plain.stats.tokens_per_second());
    std::printf("speculative:    %zu tokens in %.3f s (%.1f tokens/s)\n",
                r.stats.generated_tokens, decode_s(r.stats), r.stats.tokens_per_second());
    std::printf("speed-up: %.2fx (tokens/s, prompt excluded)\n",
                r.stats.tokens_per_second() / plain.stats.tokens_per_second());
    if (c.sampling.temperature == 0.0f)
      std::printf("identical output: %s\n", plain.tokens == r.tokens ? "yes" : "no");
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const cli c = parse(argc, argv);  // exits with 2 on a bad flag or value
  try {
    auto pool = std::make_shared<l2::thread_pool>(c.threads);  // shared by target and draft
    const auto weights = l2::load_checkpoint(c.model);
    l2::model target(weights, {.pool = pool});
    const l2::tokenizer tok(c.tokenizer, target.vocab_size());
    std::printf("model %s: dim %zu, %zu layers, vocab %zu, context %zu, %.1f MB loaded in "
                "%.3f s; %zu thread(s); draft %s, K = %zu\n\n",
                c.model.c_str(), target.cfg().dim, target.cfg().n_layers, target.vocab_size(),
                target.max_size(), static_cast<double>(weights->bytes()) / 1e6,
                weights->load_seconds(), pool->size(), c.draft.c_str(), c.k);
    if (c.draft == "none") {
      specdec::no_drafter none;
      return run(c, target, none, tok);
    }
    if (c.draft == "ngram") {
      specdec::ngram_drafter lookup({.min_ngram = c.ngram_min, .max_ngram = c.ngram_max,
                                     .max_draft = std::max<std::size_t>(c.k, 1)});
      return run(c, target, lookup, tok);
    }
    if (c.draft_layers > 0) {
      l2::layer_skip_draft draft_model(target, c.draft_layers);
      specdec::model_drafter drafter(draft_model);
      return run(c, target, drafter, tok);
    }
    // parse() admits nothing else. The draft's context is the target's: the decoder keeps both
    // at the same length.
    l2::model draft_model(l2::load_checkpoint(c.draft_model),
                          {.max_context = target.max_size(), .pool = pool});
    specdec::model_drafter drafter(draft_model);
    return run(c, target, drafter, tok);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "specdec-generate: %s\n", e.what());
    return 1;
  }
}
