// examples/llamacpp/server/stock_row.hpp - a slot's row of target logits processed into the law
// stock llama-server draws that slot's token from, for specdec to draw from and verify drafts
// against. Compiled inside llama.cpp's tools/server (common/sampling.h, with the patch series'
// common_sampler_process and common_sampler_apply_grammar).
//
// Stock llama-server samples with common_sampler_sample(grammar_first = false): it draws x from c,
// the slot's chain (reasoning budget, logit bias, penalties, DRY, top-k, typical, top-p, min-p,
// XTC, temperature) without the grammar; when the grammar forbids x it draws again from g, the
// chain applied after the grammar. So its law is
//
//     p(x) = c(x) [x valid] + c_bad g(x),    c_bad = the mass c gives to tokens the grammar forbids,
//
// which is g only when nothing truncates (top-k, top-p, min-p and the like cut g's candidates
// among the valid tokens, c's among all). The grammar is checked on c's candidates only; g is
// computed only when one of them is forbidden.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <span>
#include <vector>

#include "llama.h"
#include "sampling.h"

namespace specdec::llama_server {

/// stock_row's buffers: the grammar check's copy of the chain's candidates. reserve() once per
/// request; stock_row then allocates nothing.
struct stock_row_workspace {
  std::vector<llama_token_data> check;
  void reserve(std::size_t n_vocab) { check.reserve(n_vocab); }
};

/**
 * Row `idx` of `ctx` processed by the slot's sampler `smpl` into the logits of stock
 * llama-server's law for the slot's next token (p above): `out` gets n_vocab = out.size()
 * logits, -inf where p(x) = 0. The sampler's state (penalties' history, grammar) is unchanged;
 * its chain's own draws are not used (they advance its generator).
 */
inline void stock_row(common_sampler* smpl, llama_context* ctx, int idx, std::span<float> out,
                      stock_row_workspace& ws) {
  constexpr float none = -std::numeric_limits<float>::infinity();
  std::fill(out.begin(), out.end(), none);
  common_sampler_process(smpl, ctx, idx);
  const llama_token_data_array* c = common_sampler_get_candidates(smpl, false);
  ws.check.clear();
  float c_max = none;
  for (std::size_t j = 0; j < c->size; ++j) {
    const llama_token_data& t = c->data[j];
    if (t.id < 0 || static_cast<std::size_t>(t.id) >= out.size() || !(t.logit > none)) continue;
    out[static_cast<std::size_t>(t.id)] = t.logit;
    ws.check.push_back(t);
    c_max = std::max(c_max, t.logit);
  }
  llama_token_data_array check{ws.check.data(), ws.check.size(), -1, false};
  if (ws.check.empty() || !common_sampler_apply_grammar(smpl, &check)) return;  // p = c

  // c's mass on the tokens the grammar forbids (their logits are -inf in `check` now).
  double c_total = 0.0, c_bad = 0.0;
  for (const llama_token_data& t : ws.check) {
    const double w = std::exp(static_cast<double>(out[static_cast<std::size_t>(t.id)]) - c_max);
    c_total += w;
    if (!(t.logit > none)) c_bad += w;
  }
  if (c_bad == 0.0) return;  // every token c can draw is valid: p = c
  // log c(x) on the valid tokens, none on the forbidden ones...
  const double c_log_norm = static_cast<double>(c_max) + std::log(c_total);
  for (const llama_token_data& t : ws.check) {
    float& o = out[static_cast<std::size_t>(t.id)];
    o = t.logit > none ? static_cast<float>(static_cast<double>(o) - c_log_norm) : none;
  }
  // ... plus c_bad g(x), with g the chain after the grammar (its draw unused).
  common_sampler_sample(smpl, ctx, idx, /*grammar_first=*/true);
  const llama_token_data_array* g = common_sampler_get_candidates(smpl, false);
  float g_max = none;
  for (std::size_t j = 0; j < g->size; ++j) g_max = std::max(g_max, g->data[j].logit);
  if (!(g_max > none)) return;  // the grammar allows nothing: stock would fail too; keep c's valid part
  double g_total = 0.0;
  for (std::size_t j = 0; j < g->size; ++j)
    g_total += std::exp(static_cast<double>(g->data[j].logit) - g_max);
  const double shift = std::log(c_bad / c_total) - static_cast<double>(g_max) - std::log(g_total);
  for (std::size_t j = 0; j < g->size; ++j) {
    const llama_token_data& t = g->data[j];
    if (t.id < 0 || static_cast<std::size_t>(t.id) >= out.size() || !(t.logit > none)) continue;
    float& o = out[static_cast<std::size_t>(t.id)];
    const double add = static_cast<double>(t.logit) + shift;  // log(c_bad g(x))
    const double have = static_cast<double>(o);
    const double hi = std::max(have, add);
    o = static_cast<float>(hi + std::log(std::exp(have - hi) + std::exp(add - hi)));
  }
}

}  // namespace specdec::llama_server
