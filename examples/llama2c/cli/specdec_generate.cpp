// specdec-generate: speculative decoding on a real llama2.c checkpoint, from the command line.
//
// Shows the library end to end on a real transformer: the reference adapter (model.hpp), a
// drafter chosen by flag (none, a layer-skip view of the same weights, a second checkpoint, or
// prompt lookup), streaming output, and the decoder's statistics, as text or as one JSON object.
//
//   specdec-generate -p "I dreamed" -n 64 --draft layers:2 -k 4 --temp 0
//   specdec-generate -m big.bin -md draft.bin --draft-max 5 --json | jq .stats.tokens_per_second
//
// Flags are parsed by llama2c/cli/cli.hpp on the layer specdec-llama shares
// (common/cli/shared_flags.hpp; --help lists them; defaults are llama.cpp's: sampled at 0.8, a
// random seed that the output prints, no drafter unless asked for). Exit status: 0 on success; 2
// for a bad flag or value (checked before anything is loaded); 1 when a file cannot be read or
// the model or decoder refuses a value (see docs/command-line.md).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <new>
#include <nlohmann/json.hpp>
#include <specdec/cost/calibrate.hpp>
#include <specdec/draft/min_length_drafter.hpp>
#include <specdec/specdec.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "llama2c/cli/cli.hpp"
#include "llama2c/cli/find_tokenizer.hpp"
#include "llama2c/engine/heads_file.hpp"
#include "llama2c/engine/model.hpp"
#include "llama2c/cli/report.hpp"
#include "llama2c/engine/tokenizer.hpp"

namespace {

namespace l2 = specdec::llama2c;
using json = nlohmann::ordered_json;  // keys in the documented order

// What the program learned on loading, for the report.
struct loaded {
  std::string prompt;  // the prompt text (from -p or -f)
  std::size_t seq_len = 0, threads = 0, bytes = 0;
  double load_seconds = 0.0;
};

std::string read_prompt_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("-f/--file '" + path + "': cannot be read");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw std::runtime_error("-f/--file '" + path + "': read error");
  if (!text.empty() && text.back() == '\n') text.pop_back();  // as llama.cpp's -f does
  if (!text.empty() && text.back() == '\r') text.pop_back();
  if (text.empty()) throw std::runtime_error("-f/--file '" + path + "': the prompt is empty");
  return text;
}

const char* reason_text(specdec::stop_reason r) {
  switch (r) {
    case specdec::stop_reason::max_new_tokens:
      return "the token limit (-n)";
    case specdec::stop_reason::stop_token:
      return "an end-of-text token";
    case specdec::stop_reason::callback:
      return "the caller";
    case specdec::stop_reason::context_full:
      return "a full context";
  }
  return "?";
}

// Refuses a prompt that leaves no room to generate, with the numbers and what to change.
void check_room(std::size_t prompt_tokens, std::size_t context, std::size_t seq_len) {
  if (prompt_tokens < context) return;
  const std::string fix = context < seq_len
                              ? "shorten the prompt or raise -c/--ctx-size, at most to the "
                                "model's seq_len " +
                                    std::to_string(seq_len)
                              : "shorten the prompt: the context is the model's seq_len";
  throw std::length_error("the prompt's " + std::to_string(prompt_tokens) + " tokens " +
                          (prompt_tokens == context ? "fill" : "exceed") + " the context of " +
                          std::to_string(context) + " tokens, so nothing can be generated: " + fix);
}

// `target` is the engine itself, or a view of it (hidden_capture, for draft heads).
template <class Target, class Drafter>
int run(const l2::cli_options& c, const loaded& info, const l2::model& engine, Target& target,
        Drafter& drafter, const l2::tokenizer& tok, std::size_t (*dropped)(const Drafter&),
        const specdec::acceptance_profile& expected) {
  specdec::speculative_decoder decoder(target, drafter);
  const auto prompt = tok.encode(info.prompt);
  check_room(prompt.size(), target.max_size(), info.seq_len);
  specdec::generate_options o;
  const std::size_t room = target.max_size() - prompt.size();
  o.max_new_tokens = c.n_predict == l2::unlimited ? room : c.n_predict;
  o.draft_length = c.k;
  o.sampling = c.sampling;
  o.draft_temperature = c.draft_temperature;
  o.stop_tokens = {l2::tokenizer::bos_id, l2::tokenizer::eos_id};
  o.tree = c.tree;
  o.tree_draw = c.draw;
  o.verification = c.verification;
  if (c.k_auto) {
    o.policy = specdec::speed_policy(specdec::calibrate(target, drafter));
    o.policy.expected = expected;
  }

  const bool progress =
      l2::show_progress(isatty(STDERR_FILENO) == 1, isatty(STDOUT_FILENO) == 1, c.json);
  const auto start = std::chrono::steady_clock::now();
  double last_shown = 0.0;
  std::size_t emitted = 0;
  std::string text;  // the generated text (not the prompt)
  specdec::token_id prev = prompt.back();
  if (!c.quiet && !c.json) std::printf("%s", tok.decode(prompt).c_str());
  o.on_token = [&](specdec::token_id t) {
    const std::string piece = tok.decode(prev, t);
    prev = t;
    text += piece;
    ++emitted;
    if (!c.json) {
      std::fputs(piece.c_str(), stdout);
      std::fflush(stdout);
    }
    if (progress) {
      const double s =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (s > 0.5 && s - last_shown > 0.2) {
        std::fputs(l2::progress_line(emitted, s).c_str(), stderr);
        last_shown = s;
      }
    }
    return true;
  };
  const auto r = decoder.generate(prompt, o);
  if (progress && last_shown > 0.0) std::fputs("\r\033[K", stderr);  // erase the progress line

  // With -n -1 the token limit is the room left, so reaching it means the context is full.
  const specdec::stop_reason reason =
      r.reason == specdec::stop_reason::max_new_tokens && c.n_predict == l2::unlimited
          ? specdec::stop_reason::context_full
          : r.reason;
  const bool context_full = reason == specdec::stop_reason::context_full;
  const std::string full_note = "stopped after " + std::to_string(r.tokens.size()) +
                                " tokens: the context of " + std::to_string(target.max_size()) +
                                " tokens is full" +
                                (target.max_size() < info.seq_len ? " (-c/--ctx-size)" : "");
  json report;
  if (c.quiet) {
    std::fputs("\n", stdout);
    if (context_full) std::fprintf(stderr, "specdec-generate: %s\n", full_note.c_str());
  } else if (!c.json) {
    std::printf("\n\n%s", r.stats.summary().c_str());
    std::printf("%s\n", l2::sampling_line(c).c_str());
    if (c.draft == l2::draft_kind::heads && !r.stats.drafted_at.empty())
      std::printf("(draft position k: Medusa head k, or the EAGLE-style predictor's step k; in a "
                  "tree, depth k)\n");
    if (r.stats.draft_model_calls)
      std::printf("draft model calls: %zu\n", r.stats.draft_model_calls);
    if (c.draft_min > 0)
      std::printf("drafts shorter than --draft-min %zu, not verified: %zu\n", c.draft_min,
                  dropped(drafter));
    if (context_full)
      std::printf("%s\n", full_note.c_str());
    else
      std::printf("stopped at %s\n", reason_text(reason));
  } else {
    report["request"] = {
        {"prompt", info.prompt},
        {"prompt_file", c.prompt_file.empty() ? json(nullptr) : json(c.prompt_file)},
        {"prompt_tokens", prompt.size()},
        {"max_new_tokens", o.max_new_tokens}};
    report["options"] = l2::options_json(c);
    report["model"] = {{"dim", engine.cfg().dim},           {"n_layers", engine.cfg().n_layers},
                       {"vocab_size", target.vocab_size()}, {"seq_len", info.seq_len},
                       {"context", target.max_size()},      {"bytes", info.bytes},
                       {"load_seconds", info.load_seconds}, {"threads", info.threads}};
    report["text"] = text;
    report["tokens"] = r.tokens;
    report["stop_reason"] = l2::stop_reason_name(reason);
    report["stats"] = l2::stats_json(r.stats);
    report["draft_min_dropped"] = dropped(drafter);
    if (c.k_auto)
      report["policy"] = {{"cost_curve", o.policy.cost.target},
                          {"draft_per_level", o.policy.cost.draft_per_level},
                          {"draft_per_node", o.policy.cost.draft_per_node},
                          {"last_plan", decoder.plan().branching},
                          {"predicted_tokens_per_step", decoder.plan().tokens_per_step}};
  }

  if (c.compare_plain) {
    // The same request without a drafter, on the same target (its cache is refilled).
    o.on_token = nullptr;
    const auto plain = specdec::generate_autoregressive(target, prompt, o);
    const double speedup = r.stats.tokens_per_second() / plain.stats.tokens_per_second();
    // Greedy, coupled and sample-and-match runs promise plain decoding's very tokens.
    const bool same_tokens = c.sampling.temperature == 0.0f ||
                        c.verification == specdec::verification_rule::coupled ||
                        c.verification == specdec::verification_rule::sample_match;
    if (c.json) {
      report["compare_plain"] = {
          {"stats", l2::stats_json(plain.stats)},
          {"speedup", speedup},
          {"identical", same_tokens ? json(plain.tokens == r.tokens) : json(nullptr)}};
    } else {
      std::printf("plain decoding: %zu tokens in %.3f s (%.1f tokens/s)\n",
                  plain.stats.generated_tokens, plain.stats.decode_seconds(),
                  plain.stats.tokens_per_second());
      std::printf("speculative:    %zu tokens in %.3f s (%.1f tokens/s)\n",
                  r.stats.generated_tokens, r.stats.decode_seconds(), r.stats.tokens_per_second());
      std::printf("speed-up: %.2fx (tokens/s, prompt excluded)\n", speedup);
      if (same_tokens) std::printf("identical output: %s\n", plain.tokens == r.tokens ? "yes" : "no");
    }
  }
  if (c.json) {
    // Invalid UTF-8 (a multi-byte character cut by the token limit) becomes U+FFFD; "tokens"
    // holds the exact ids.
    std::puts(report.dump(2, ' ', false, json::error_handler_t::replace).c_str());
  }
  return 0;
}

template <class Inner, class Target = l2::model>
int run_wrapped(const l2::cli_options& c, const loaded& info, const l2::model& engine,
                Target& target, Inner& inner, const l2::tokenizer& tok) {
  // Draft heads carry their held-out accuracy: where -k auto's first plans start.
  const auto expected = specdec::expected_acceptance_of(inner);
  if constexpr (!std::is_same_v<Inner, specdec::ngram_drafter>) {
    if (c.ngram_first) {  // --draft ngram+...: prompt lookup first, `inner` when it has nothing
      specdec::ngram_drafter lookup(c.ngram);
      specdec::composed_drafter composed(lookup, inner);
      specdec::min_length_drafter<decltype(composed)> drafter(composed, c.draft_min);
      return run(
          c, info, engine, target, drafter, tok,
          +[](const specdec::min_length_drafter<decltype(composed)>& d) { return d.dropped(); },
          expected);
    }
  }
  specdec::min_length_drafter<Inner> drafter(inner, c.draft_min);
  return run(
      c, info, engine, target, drafter, tok,
      +[](const specdec::min_length_drafter<Inner>& d) { return d.dropped(); }, expected);
}

int generate(const l2::cli_options& c) {
  loaded info;
  info.prompt = c.prompt_file.empty() ? c.prompt : read_prompt_file(c.prompt_file);
  auto pool = std::make_shared<l2::thread_pool>(c.threads);  // shared by target and draft
  const auto weights = l2::load_checkpoint(c.model);
  info.seq_len = weights->cfg().seq_len;
  if (c.ctx_size > info.seq_len)
    throw std::invalid_argument("-c/--ctx-size " + std::to_string(c.ctx_size) +
                                ": exceeds the model's seq_len " + std::to_string(info.seq_len));
  info.threads = pool->size();
  info.bytes = weights->bytes();
  info.load_seconds = weights->load_seconds();
  l2::model target(weights, {.max_context = c.ctx_size, .pool = pool});
  const l2::tokenizer tok(c.tokenizer, target.vocab_size());
  if (!c.quiet && !c.json)
    std::printf(
        "model %s: dim %zu, %zu layers, vocab %zu, context %zu, %.1f MB loaded in "
        "%.3f s; %zu thread(s); draft %s, K = %s\n\n",
        c.model.c_str(), target.cfg().dim, target.cfg().n_layers, target.vocab_size(),
        target.max_size(), static_cast<double>(info.bytes) / 1e6, info.load_seconds, info.threads,
        c.draft_text.c_str(), c.k_auto ? "auto (the speed policy)" : std::to_string(c.k).c_str());
  switch (c.draft) {
    case l2::draft_kind::none: {
      specdec::no_drafter none;
      return run(
          c, info, target, target, none, tok, +[](const specdec::no_drafter&) { return std::size_t{0}; },
          {});
    }
    case l2::draft_kind::ngram: {
      specdec::ngram_drafter lookup(c.ngram);
      return run_wrapped(c, info, target, target, lookup, tok);
    }
    case l2::draft_kind::layers: {
      l2::layer_skip_draft draft_model(target, c.draft_layers);
      specdec::model_drafter drafter(draft_model, {.p_min = c.draft_p_min});
      return run_wrapped(c, info, target, target, drafter, tok);
    }
    case l2::draft_kind::model: {
      // The draft's context is the target's: the decoder keeps both at the same length.
      l2::model draft_model(l2::load_checkpoint(c.draft_model),
                            {.max_context = target.max_size(), .pool = pool});
      specdec::model_drafter drafter(draft_model, {.p_min = c.draft_p_min});
      return run_wrapped(c, info, target, target, drafter, tok);
    }
    case l2::draft_kind::heads: {
      // The decoder drives the capture, which keeps the hidden rows the heads start from.
      specdec::hidden_capture<l2::model> capture(target);
      auto heads = l2::read_heads(c.draft_heads);
      l2::fit_heads(heads, target.cfg(), c.draft_heads);
      const auto candidates =
          c.heads_sampled ? specdec::head_candidates::sampled : specdec::head_candidates::top;
      const auto& w = *target.shared_weights();
      if (!c.quiet && !c.json) std::printf("%s\n\n", l2::heads_summary(heads).c_str());
      if (heads.kind == l2::heads_kind::medusa) {
        specdec::medusa_drafter drafter(capture, std::move(heads.medusa), w.classifier(),
                                        {.max_nodes = c.heads_nodes,
                                         .candidates = candidates,
                                         .threads = l2::lend(*pool)});
        return run_wrapped(c, info, target, capture, drafter, tok);
      }
      specdec::eagle_drafter drafter(
          capture, std::move(heads.eagle), w.classifier(), w.token_embedding(),
          {.max_nodes = c.heads_nodes,
           .expand = c.heads_expand,
           .candidates = candidates,
           .threads = l2::lend(*pool)});
      return run_wrapped(c, info, target, capture, drafter, tok);
    }
  }
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  l2::cli_options c;
  try {
    c = l2::parse_cli(argc, argv);
  } catch (const std::exception& e) {  // usage_error, or anything the parser itself threw
    std::fprintf(stderr, "specdec-generate: %s\n(specdec-generate --help lists the flags)\n",
                 e.what());
    return 2;
  }
  if (!c.help.empty()) {
    std::fputs(c.help.c_str(), stdout);
    return 0;
  }
  if (c.n_gpu_layers)
    std::fprintf(stderr,
                 "specdec-generate: -ngl %lld: this engine runs on the CPU only; nothing to "
                 "offload\n",
                 *c.n_gpu_layers);
  specdec::cli::shared_flags::draw_seed(c);  // unless -s: printed, so the run can be repeated
  try {
    // Beside the model; a missing model is reported by the loader instead.
    std::error_code ec;
    if (c.tokenizer.empty() && std::filesystem::is_regular_file(c.model, ec))
      c.tokenizer = l2::find_tokenizer(c.model);
    return generate(c);
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr,
                 "specdec-generate: out of memory (a request too large for this "
                 "machine: check -k, --tree, --ngram-candidates and -c)\n");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "specdec-generate: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "specdec-generate: an unknown error\n");
  }
  return 1;
}
