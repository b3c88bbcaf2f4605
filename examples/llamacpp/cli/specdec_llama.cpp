// specdec-llama: speculative decoding with specdec on llama.cpp GGUF models. The target runs in
// one llama.cpp context (llamacpp/adapters/tree_model.hpp: chains and whole token trees in one
// llama_decode); the drafter is a GGUF draft model in a second context, n-gram prompt lookup,
// draft heads on the target's hidden rows (--draft heads:FILE: the target context is then a
// llamacpp/adapters/hidden_model.hpp, made with embeddings on), or nobody. --grammar-file masks every row
// with a GBNF grammar (llamacpp/adapters/grammar_processor.hpp). -np N serves N requests together in one
// context (llamacpp/adapters/batch_model.hpp + specdec::batch_decoder: one llama_decode per step for all).
// Without --spec-draft-n-max or --tree, the draft shape is planned before every step from the
// target's measured cost curve and the acceptance seen so far (specdec::calibrate +
// specdec::speed_policy), and plain decoding is chosen when no shape is predicted to pay.
// --rpc HOST:PORT,... puts the target's -ngl layers on llama.cpp's RPC servers (ggml-rpc-server);
// -ngld 0 keeps the draft model here.
//
//   specdec-llama -m target.gguf -md draft.gguf -p "The machine" -n 100 --temp 0 --compare-plain
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <llama2c/engine/heads_file.hpp>
#include <specdec/cost/calibrate.hpp>
#include <specdec/specdec.hpp>

#include "common/cli/report.hpp"
#include "llamacpp/adapters/batch_model.hpp"
#include "llamacpp/adapters/context_model.hpp"
#include "llamacpp/adapters/grammar_processor.hpp"
#include "llamacpp/adapters/hidden_model.hpp"
#include "llamacpp/cli/llama_cli.hpp"
#include "llamacpp/adapters/tree_model.hpp"
#include "llamacpp/adapters/vocab_text.hpp"

namespace {

using namespace specdec::llamacpp;
using json = nlohmann::ordered_json;

/// Refuses a draft model whose vocabulary is not the target's, token by token.
void check_same_vocabulary(const gguf_model& target, const gguf_model& draft) {
  if (draft.vocab_size() != target.vocab_size())
    throw std::invalid_argument("-md: the draft model '" + draft.path() + "' has " +
                                std::to_string(draft.vocab_size()) +
                                " tokens, the target has " + std::to_string(target.vocab_size()));
  for (std::size_t t = 0; t < target.vocab_size(); ++t) {
    const auto id = static_cast<llama_token>(t);
    if (std::strcmp(llama_vocab_get_text(target.vocab(), id),
                    llama_vocab_get_text(draft.vocab(), id)) != 0)
      throw std::invalid_argument("-md: the draft model's token " + std::to_string(t) +
                                  " is not the target's: another vocabulary");
  }
}

/// The heads file at `path`, fitted to the target as specdec-generate fits it: the same
/// vocabulary, and the same hidden width or a wider one (a target reshaped from the model the
/// heads were trained on: the weights are widened, llama2c::fit_heads). std::runtime_error
/// naming the file and both values otherwise.
specdec::llama2c::heads_record load_heads(const std::string& path, const gguf_model& target,
                                          const gguf_classifier& w) {
  auto heads = specdec::llama2c::read_heads(path);
  specdec::llama2c::config cfg;
  cfg.dim = target.embedding_size();
  cfg.vocab_size = target.vocab_size();
  cfg.shared_classifier = w.shared;
  specdec::llama2c::fit_heads(heads, cfg, path);
  return heads;
}

specdec::weight_view view(const specdec::row_matrix& m) { return {m.data(), m.rows(), m.cols()}; }

/// The context options -c, -t and -fa ask for (target and draft contexts alike).
// Whether a run promises plain decoding's very tokens: greedy, or coupled / sample-and-match
// verification with the same seed.
bool same_tokens_promised(const llama_cli_options& c) {
  return c.sampling.greedy() || c.verification == specdec::verification_rule::coupled ||
         c.verification == specdec::verification_rule::sample_match;
}

/// -ngl for llama_model_params: as given, else llama.cpp's default.
std::optional<int> gpu_layers(const llama_cli_options& c) {
  if (!c.n_gpu_layers) return std::nullopt;
  return static_cast<int>(std::clamp<long long>(*c.n_gpu_layers, -2, 1 << 20));
}

/// -ngld for the draft model's llama_model_params: as given, else -ngl's.
std::optional<int> draft_gpu_layers(const llama_cli_options& c) {
  if (!c.n_gpu_layers_draft) return gpu_layers(c);
  return static_cast<int>(std::clamp<long long>(*c.n_gpu_layers_draft, -2, 1 << 20));
}

/// --rpc: the RPC servers become devices before any model is loaded.
void connect_rpc(const llama_cli_options& c) {
  if (!c.rpc_servers.empty()) add_rpc_servers(c.rpc_servers);
}

context_options cli_context_options(const llama_cli_options& c) {
  return {.n_ctx = c.ctx_size,
          .n_threads = c.threads,
          .flash_attn = c.flash_attn == flash_attention::on    ? LLAMA_FLASH_ATTN_TYPE_ENABLED
                        : c.flash_attn == flash_attention::off ? LLAMA_FLASH_ATTN_TYPE_DISABLED
                                                               : LLAMA_FLASH_ATTN_TYPE_AUTO};
}

json options_json(const llama_cli_options& c, const specdec::generate_options& o) {
  json j;
  j["model"] = c.model;
  j["draft_model"] = c.draft_model;
  j["draft"] = c.draft == llama_draft::none    ? "none"
               : c.draft == llama_draft::model ? "model"
               : c.draft == llama_draft::ngram ? "ngram"
                                               : "heads";
  j["heads_file"] = c.heads_file;
  j["n_predict"] = o.max_new_tokens;
  j["ctx_size"] = c.ctx_size;
  j["threads"] = c.threads;
  j["flash_attn"] = c.flash_attn == flash_attention::on    ? "on"
                    : c.flash_attn == flash_attention::off ? "off"
                                                           : "auto";
  j["n_gpu_layers"] = c.n_gpu_layers ? json(*c.n_gpu_layers) : json(nullptr);
  j["n_gpu_layers_draft"] = c.n_gpu_layers_draft ? json(*c.n_gpu_layers_draft) : json(nullptr);
  j["rpc"] = c.rpc_servers;
  j["sampling"] = specdec::cli::sampling_json(c);
  j["draft_max"] = c.k ? json(*c.k) : json("policy");
  j["draft_min"] = c.draft_min;
  j["draft_p_min"] = c.draft_p_min;
  j["tree"] = c.tree;
  j["verification"] = specdec::cli::verification_name(c.verification);
  j["grammar_file"] = c.grammar_file;
  j["grammar"] = c.grammar;
  return j;
}

int run(const llama_cli_options& c) {
  set_llama_log_level(false);
  std::string prompt_text = c.prompt;
  if (!c.prompt_file.empty()) {
    std::ifstream in(c.prompt_file, std::ios::binary);
    if (!in) throw std::invalid_argument("-f: cannot read '" + c.prompt_file + "'");
    std::ostringstream s;
    s << in.rdbuf();
    prompt_text = s.str();
  }
  connect_rpc(c);
  const gguf_model target_file(c.model, gpu_layers(c));
  const context_options co = cli_context_options(c);
  const std::size_t n_ctx = c.ctx_size ? c.ctx_size : target_file.trained_context();
  // A sequence per leaf: --tree's leaves, or 64 for the policy's trees (its max_nodes is 32).
  const std::size_t leaves = c.tree.empty() ? 64 : tree_leaves(c.tree);
  // Heads read the target's hidden rows: its context is made with embeddings on.
  const context_options target_co = c.draft == llama_draft::heads
                                        ? hidden_options(tree_options(std::min(leaves, n_ctx), co))
                                        : tree_options(std::min(leaves, n_ctx), co);
  std::optional<tree_model> chains_target;
  std::optional<hidden_model> hidden_target;
  if (c.draft == llama_draft::heads) hidden_target.emplace(target_file, target_co);
  else chains_target.emplace(target_file, target_co);
  tree_model& target = hidden_target ? *hidden_target : *chains_target;
  const std::vector<specdec::token_id> prompt = tokenize(target_file, prompt_text);
  if (prompt.empty()) throw std::invalid_argument("-p: the prompt has no tokens");
  if (prompt.size() >= target.max_size())
    throw std::invalid_argument("-c: the prompt's " + std::to_string(prompt.size()) +
                                " tokens leave no room in a context of " +
                                std::to_string(target.max_size()));

  specdec::generate_options o;
  o.max_new_tokens = std::min(c.n_predict, target.max_size() - prompt.size());
  if (!c.ignore_eos) o.stop_tokens = end_of_generation_tokens(target_file);
  o.sampling = c.sampling;
  if (!c.grammar_file.empty() || !c.grammar.empty()) {  // every row, target's and draft's, masked
    grammar_processor grammar = c.grammar.empty()
                                    ? grammar_processor(target_file, c.grammar_file)
                                    : grammar_processor::from_text(target_file, c.grammar, "--grammar");
    grammar.start(prompt);
    o.sampling.processor = grammar;
  }
  o.draft_length = c.k.value_or(4);
  o.tree = c.tree;
  o.verification = c.verification;
  if (!c.json) {
    std::fputs(prompt_text.c_str(), stdout);
    o.on_token = [&](specdec::token_id t) {
      std::fputs(piece(target_file, t).c_str(), stdout);
      std::fflush(stdout);
      return true;
    };
  }

  json report;
  report["options"] = options_json(c, o);
  report["prompt_tokens"] = prompt.size();
  // `tgt` is the target context, or the hidden_capture around it for heads.
  auto decode = [&](auto& tgt, auto& drafter) {
    if (!c.k && c.tree.empty() && c.draft != llama_draft::none) {  // --tree: a fixed shape
      const auto c0 = std::chrono::steady_clock::now();
      const auto cost = specdec::calibrate(tgt, drafter);
      report["policy_calibration_seconds"] =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - c0).count();
      o.policy = specdec::speed_policy(cost);
      // Draft heads carry their held-out accuracy: the policy's first plans start from it.
      o.policy.expected = specdec::expected_acceptance_of(drafter);
      report["policy_cost_curve"] = cost.target;
      report["policy_draft_per_level"] = cost.draft_per_level;
      report["policy_draft_per_node"] = cost.draft_per_node;
    }
    specdec::speculative_decoder decoder(tgt, drafter);
    const auto r = decoder.generate(prompt, o);
    std::string text;
    for (const auto t : r.tokens) text += piece(target_file, t);
    report["tokens"] = r.tokens;
    report["text"] = text;
    report["stop_reason"] = specdec::cli::stop_reason_name(r.reason);
    report["stats"] = specdec::cli::stats_json(r.stats);
    if (!c.json)
      std::printf("\n\n%s%s\n", r.stats.summary().c_str(), specdec::cli::sampling_line(c).c_str());
    if (c.compare_plain) {
      specdec::no_drafter none;
      specdec::speculative_decoder plain(tgt, none);
      auto po = o;
      po.draft_length = 0;
      po.tree.clear();
      po.policy = {};
      po.on_token = nullptr;
      const auto p = plain.generate(prompt, po);
      const double speedup = r.stats.tokens_per_second() / p.stats.tokens_per_second();
      report["plain"] = specdec::cli::stats_json(p.stats);
      report["speedup"] = speedup;
      if (!c.json)
        std::printf("plain: %.1f tokens/s; speed-up: %.2fx (tokens/s, prompt excluded)%s\n",
                    p.stats.tokens_per_second(), speedup,
                    same_tokens_promised(c) ? (p.tokens == r.tokens ? "; identical output: yes"
                                                                : "; identical output: NO")
                                        : "");
    }
  };

  if (c.draft == llama_draft::model) {
    const gguf_model draft_file(c.draft_model, draft_gpu_layers(c));
    check_same_vocabulary(target_file, draft_file);
    context_model draft(draft_file, co);
    specdec::model_drafter drafter(draft, {.p_min = c.draft_p_min});
    if (c.draft_min > 0) {
      specdec::min_length_drafter gated(drafter, c.draft_min);
      decode(target, gated);
    } else {
      decode(target, drafter);
    }
  } else if (c.draft == llama_draft::ngram) {
    specdec::ngram_drafter lookup;
    decode(target, lookup);
  } else if (c.draft == llama_draft::heads) {
    // The decoder drives the capture, which keeps the hidden rows the heads start from; the
    // heads multiply their rows with the target's classifier and embedding, read from its file.
    specdec::hidden_capture<hidden_model> capture(*hidden_target);
    const gguf_classifier w = load_gguf_classifier(target_file);
    auto heads = load_heads(c.heads_file, target_file, w);
    if (!c.json) std::fprintf(stderr, "%s\n", specdec::llama2c::heads_summary(heads).c_str());
    report["heads"] = specdec::llama2c::heads_summary(heads);
    if (heads.kind == specdec::llama2c::heads_kind::medusa) {
      specdec::medusa_drafter drafter(capture, std::move(heads.medusa), view(w.classifier));
      decode(capture, drafter);
    } else {
      specdec::eagle_drafter drafter(capture, std::move(heads.eagle), view(w.classifier),
                                     view(w.embedding));
      decode(capture, drafter);
    }
  } else {
    specdec::no_drafter none;
    o.draft_length = 0;
    decode(target, none);
  }
  if (c.json) std::cout << report.dump(2) << "\n";
  return 0;
}


/// The requests of -np N: the non-empty lines of -f (cycled), or -p N times.
std::vector<std::string> parallel_prompts(const llama_cli_options& c) {
  std::vector<std::string> lines;
  if (!c.prompt_file.empty()) {
    std::ifstream in(c.prompt_file);
    if (!in) throw std::invalid_argument("-f: cannot read '" + c.prompt_file + "'");
    for (std::string line; std::getline(in, line);)
      if (!line.empty()) lines.push_back(line);
    if (lines.empty()) throw std::invalid_argument("-f: '" + c.prompt_file + "' has no lines");
  } else {
    lines.push_back(c.prompt);
  }
  std::vector<std::string> out;
  for (std::size_t i = 0; i < c.parallel; ++i) out.push_back(lines[i % lines.size()]);
  return out;
}

/// -np N: the N requests decoded together by specdec::batch_decoder on one context
/// (batch_model: one llama_decode per step for every running request), each with its own
/// drafter (a draft model context each, or n-gram lookup) and seed (-s + i); --compare-plain
/// then decodes each request alone, one after another, one token per llama_decode.
int run_parallel(const llama_cli_options& c) {
  set_llama_log_level(false);
  const auto texts = parallel_prompts(c);
  connect_rpc(c);
  const gguf_model target_file(c.model, gpu_layers(c));
  const context_options co = cli_context_options(c);
  std::vector<std::vector<specdec::token_id>> prompts;
  std::size_t cells = 0;
  for (const auto& text : texts) {
    prompts.push_back(tokenize(target_file, text));
    if (prompts.back().empty()) throw std::invalid_argument("-p/-f: a prompt has no tokens");
    if (prompts.back().size() >= target_file.trained_context())
      throw std::invalid_argument("-p/-f: a prompt of " + std::to_string(prompts.back().size()) +
                                  " tokens leaves no room in the model's context of " +
                                  std::to_string(target_file.trained_context()));
    // At most the model's trained context per request (-n -1: until it is full).
    const std::size_t n = prompts.back().size();
    cells = std::max(cells, n + std::min(c.n_predict, target_file.trained_context() - n));
  }
  // Each request may hold n_ctx / -np of the context's cells (batch_model::max_size(), as
  // llama-server splits -c among its slots): by default room for the longest request in full.
  context_options bco = co;
  bco.n_ctx = c.ctx_size ? c.ctx_size : cells * c.parallel;
  batch_model model(target_file, batch_context_options(c.parallel, bco));
  const std::vector<specdec::token_id> stops =
      c.ignore_eos ? std::vector<specdec::token_id>{} : end_of_generation_tokens(target_file);
  auto options_for = [&](std::size_t i) {
    specdec::generate_options o;
    o.max_new_tokens = std::min(c.n_predict, target_file.trained_context() - prompts[i].size());
    o.stop_tokens = stops;
    o.sampling = c.sampling;
    o.sampling.seed = c.sampling.seed + i;
    o.draft_length = c.draft == llama_draft::none ? 0 : c.k.value_or(4);
    o.verification = c.verification;
    return o;
  };

  json report;
  report["options"] = {{"model", c.model}, {"parallel", c.parallel},
                       {"draft", c.draft == llama_draft::none    ? "none"
                                 : c.draft == llama_draft::model ? "model"
                                                                 : "ngram"},
                       {"draft_max", c.draft == llama_draft::none ? 0 : c.k.value_or(4)},
                       {"n_predict", c.n_predict}, {"ctx_size", bco.n_ctx},
                       {"threads", c.threads}, {"rpc", c.rpc_servers},
                       {"sampling", specdec::cli::sampling_json(c)}};
  std::vector<std::vector<specdec::token_id>> outputs(c.parallel);
  auto serve = [&](auto& drafters) {
    using draft_t = std::remove_reference_t<decltype(*drafters[0])>;
    specdec::batch_decoder<batch_model, draft_t> decoder(model);
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<specdec::sequence_id> ids;
    for (std::size_t i = 0; i < c.parallel; ++i)
      ids.push_back(decoder.add(prompts[i], options_for(i), *drafters[i]));
    decoder.run();
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::size_t generated = 0;
    json seqs = json::array();
    for (std::size_t i = 0; i < c.parallel; ++i) {
      if (decoder.status(ids[i]) == specdec::sequence_status::failed)
        throw std::runtime_error("-np: request " + std::to_string(i) + " failed: " +
                                 decoder.error(ids[i]));
      outputs[i] = decoder.result(ids[i]).tokens;
      generated += outputs[i].size();
      std::string text;
      for (const auto t : outputs[i]) text += piece(target_file, t);
      if (!c.json) std::printf("[%zu] %s%s\n\n", i, texts[i].c_str(), text.c_str());
      seqs.push_back({{"prompt", texts[i]}, {"tokens", outputs[i]}, {"text", text}});
    }
    const auto& st = decoder.stats();
    report["sequences"] = seqs;
    report["batch"] = {{"generated_tokens", generated},  {"seconds", seconds},
                       {"tokens_per_second", generated / seconds}, {"steps", st.steps},
                       {"target_calls", st.target_calls}, {"rows_scored", st.rows_scored}};
    if (!c.json)
      std::printf("batch: %zu requests, %zu tokens in %.3f s: %.1f tokens/s (prompts included), "
                  "%zu steps, %zu llama_decode calls, %zu rows\n",
                  c.parallel, generated, seconds, generated / seconds, st.steps, st.target_calls,
                  st.rows_scored);
    if (!c.json)
      std::printf("%s; request i: seed + i\n", specdec::cli::sampling_line(c).c_str());
    return generated / seconds;
  };

  double batch_tps = 0.0;
  if (c.draft == llama_draft::model) {
    const gguf_model draft_file(c.draft_model, draft_gpu_layers(c));
    check_same_vocabulary(target_file, draft_file);
    std::vector<std::unique_ptr<context_model>> contexts;
    std::vector<std::unique_ptr<specdec::model_drafter<context_model>>> drafters;
    for (std::size_t i = 0; i < c.parallel; ++i) {
      context_options dco = co;
      dco.n_ctx = target_file.trained_context();
      contexts.push_back(std::make_unique<context_model>(draft_file, dco));
      drafters.push_back(std::make_unique<specdec::model_drafter<context_model>>(
          *contexts.back(), specdec::model_drafter_options{.p_min = c.draft_p_min}));
    }
    batch_tps = serve(drafters);
  } else if (c.draft == llama_draft::ngram) {
    std::vector<std::unique_ptr<specdec::ngram_drafter>> drafters;
    for (std::size_t i = 0; i < c.parallel; ++i)
      drafters.push_back(std::make_unique<specdec::ngram_drafter>());
    batch_tps = serve(drafters);
  } else {
    std::vector<std::unique_ptr<specdec::no_drafter>> drafters;
    for (std::size_t i = 0; i < c.parallel; ++i)
      drafters.push_back(std::make_unique<specdec::no_drafter>());
    batch_tps = serve(drafters);
  }
  if (c.compare_plain) {
    context_options pco = co;
    pco.n_ctx = std::min(target_file.trained_context(), bco.n_ctx);
    context_model plain_model(target_file, pco);
    specdec::no_drafter none;
    specdec::speculative_decoder plain(plain_model, none);
    std::size_t generated = 0, same = 0;
    const auto t0 = std::chrono::steady_clock::now();
    for (std::size_t i = 0; i < c.parallel; ++i) {
      auto o = options_for(i);
      o.draft_length = 0;
      const auto r = plain.generate(prompts[i], o);
      generated += r.tokens.size();
      same += r.tokens == outputs[i] ? 1 : 0;
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double plain_tps = generated / seconds;
    report["plain"] = {{"generated_tokens", generated}, {"seconds", seconds},
                       {"tokens_per_second", plain_tps}, {"identical_outputs", same}};
    report["speedup"] = batch_tps / plain_tps;
    if (!c.json)
      std::printf("plain, one request after another: %.1f tokens/s; speed-up: %.2fx%s\n", plain_tps,
                  batch_tps / plain_tps,
                  same_tokens_promised(c) ? (same == c.parallel ? "; identical outputs: yes"
                                                            : "; identical outputs: NO")
                                      : "");
  }
  if (c.json) std::cout << report.dump(2) << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  llama_cli_options c;
  try {
    c = parse_llama_cli(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const usage_error& e) {
    std::fprintf(stderr, "specdec-llama: %s\n", e.what());
    return 2;
  }
  if (!c.help.empty()) {
    std::fputs(c.help.c_str(), stdout);
    return 0;
  }
  specdec::cli::shared_flags::draw_seed(c);  // unless -s: printed, so the run can be repeated
  try {
    return c.parallel > 0 ? run_parallel(c) : run(c);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "specdec-llama: %s\n", e.what());
    return 1;
  }
}
