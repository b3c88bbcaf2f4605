// specdec-llama: speculative decoding with specdec on llama.cpp GGUF models. The target runs in
// one llama.cpp context (llamacpp/tree_model.hpp: chains and whole token trees in one
// llama_decode); the drafter is a GGUF draft model in a second context, n-gram prompt lookup, or
// nobody. --grammar-file masks every row with a GBNF grammar (llamacpp/grammar_processor.hpp).
// Without --spec-draft-n-max or --tree, the draft shape is planned before every step from the
// target's measured cost curve and the acceptance seen so far (specdec::calibrate +
// specdec::speed_policy), and plain decoding is chosen when no shape is predicted to pay.
//
//   specdec-llama -m target.gguf -md draft.gguf -p "The machine" -n 100 --temp 0 --compare-plain
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include <llama2c/report.hpp>
#include <specdec/cost/calibrate.hpp>
#include <specdec/specdec.hpp>

#include "llamacpp/context_model.hpp"
#include "llamacpp/grammar_processor.hpp"
#include "llamacpp/llama_cli.hpp"
#include "llamacpp/tree_model.hpp"
#include "llamacpp/vocab_text.hpp"

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

json options_json(const llama_cli_options& c, const specdec::generate_options& o) {
  json j;
  j["model"] = c.model;
  j["draft_model"] = c.draft_model;
  j["draft"] = c.draft == llama_draft::none ? "none" : c.draft == llama_draft::model ? "model"
                                                                                     : "ngram";
  j["n_predict"] = o.max_new_tokens;
  j["ctx_size"] = c.ctx_size;
  j["threads"] = c.threads;
  j["flash_attn"] = c.flash_attn == flash_attention::on    ? "on"
                    : c.flash_attn == flash_attention::off ? "off"
                                                           : "auto";
  j["sampling"] = {{"temperature", c.sampling.temperature}, {"top_k", c.sampling.top_k},
                   {"top_p", c.sampling.top_p},             {"min_p", c.sampling.min_p},
                   {"seed", c.sampling.seed}};
  j["draft_max"] = c.k ? json(*c.k) : json("policy");
  j["draft_min"] = c.draft_min;
  j["draft_p_min"] = c.draft_p_min;
  j["tree"] = c.tree;
  j["verification"] = c.verification == specdec::chain_verification::block ? "block" : "token";
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
  const gguf_model target_file(c.model);
  const context_options co{
      .n_ctx = c.ctx_size,
      .n_threads = c.threads,
      .flash_attn = c.flash_attn == flash_attention::on    ? LLAMA_FLASH_ATTN_TYPE_ENABLED
                    : c.flash_attn == flash_attention::off ? LLAMA_FLASH_ATTN_TYPE_DISABLED
                                                           : LLAMA_FLASH_ATTN_TYPE_AUTO};
  const std::size_t n_ctx = c.ctx_size ? c.ctx_size : target_file.trained_context();
  // A sequence per leaf: --tree's leaves, or 64 for the policy's trees (its max_nodes is 32).
  const std::size_t leaves = c.tree.empty() ? 64 : tree_leaves(c.tree);
  tree_model target(target_file, tree_options(std::min(leaves, n_ctx), co));
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
  auto decode = [&](auto& drafter) {
    if (!c.k && c.tree.empty() && c.draft != llama_draft::none) {  // --tree: a fixed shape
      const auto cost = specdec::calibrate(target, drafter);
      o.replan = specdec::speed_policy(cost);
      report["policy_cost_curve"] = cost.target;
    }
    specdec::speculative_decoder decoder(target, drafter);
    const auto r = decoder.generate(prompt, o);
    std::string text;
    for (const auto t : r.tokens) text += piece(target_file, t);
    report["tokens"] = r.tokens;
    report["text"] = text;
    report["stop_reason"] = specdec::llama2c::stop_reason_name(r.reason);
    report["stats"] = specdec::llama2c::stats_json(r.stats);
    if (!c.json) std::printf("\n\n%s\n", r.stats.summary().c_str());
    if (c.compare_plain) {
      specdec::no_drafter none;
      specdec::speculative_decoder plain(target, none);
      auto po = o;
      po.draft_length = 0;
      po.tree.clear();
      po.replan = {};
      po.on_token = nullptr;
      const auto p = plain.generate(prompt, po);
      const double speedup = r.stats.tokens_per_second() / p.stats.tokens_per_second();
      report["plain"] = specdec::llama2c::stats_json(p.stats);
      report["speedup"] = speedup;
      if (!c.json)
        std::printf("plain: %.1f tokens/s; speed-up: %.2fx (tokens/s, prompt excluded)%s\n",
                    p.stats.tokens_per_second(), speedup,
                    c.sampling.greedy() ? (p.tokens == r.tokens ? "; identical output: yes"
                                                                : "; identical output: NO")
                                        : "");
    }
  };

  if (c.draft == llama_draft::model) {
    const gguf_model draft_file(c.draft_model);
    check_same_vocabulary(target_file, draft_file);
    context_model draft(draft_file, co);
    specdec::model_drafter drafter(draft, {.p_min = c.draft_p_min});
    if (c.draft_min > 0) {
      specdec::min_length_drafter gated(drafter, c.draft_min);
      decode(gated);
    } else {
      decode(drafter);
    }
  } else if (c.draft == llama_draft::ngram) {
    specdec::ngram_drafter lookup;
    decode(lookup);
  } else {
    specdec::no_drafter none;
    o.draft_length = 0;
    decode(none);
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
  try {
    return run(c);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "specdec-llama: %s\n", e.what());
    return 1;
  }
}
