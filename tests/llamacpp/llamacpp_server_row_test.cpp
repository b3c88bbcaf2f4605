// tests/llamacpp/llamacpp_server_row_test.cpp - the patched llama-server's row processing
// (examples/llamacpp/server/stock_row.hpp) against stock llama-server's law under a grammar. Stock
// draws x from c (the chain without the grammar) and, when the grammar forbids x, draws again from
// g (the chain after the grammar): p(x) = c(x) [x valid] + c_bad g(x). On a real row (aidreams260K)
// with a grammar that forbids the row's most likely token, for llama-server's default chain,
// top-p, min-p, a logit bias, repetition penalties and greedy decoding:
//   - stock_row's distribution equals that formula, built from llama.cpp's own pieces (a sampler
//     without the grammar for c, one with the grammar first for g, the bare grammar sampler for
//     which tokens are valid), within float rounding;
//   - 20,000 draws of stock's common_sampler_sample pass a chi-square test against it, while the
//     grammar-first row (g, what the server drew from before) fails the same test wherever it
//     differs from p (on this row, every truncating setting but the logit bias): the control.
// Built only on a llama.cpp source with the patch series (its common_sampler_process and
// common_sampler_apply_grammar), as CI builds it.
#include "common.hpp"

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "support/chi_square.hpp"

#include <llamacpp/adapters/context_model.hpp>
#include <llamacpp/adapters/vocab_text.hpp>

#include "sampling.h"
#include "specdec_server.hpp"  // slot_speculation (and stock_row.hpp)

using specdec::token_id;
using namespace specdec::llamacpp;
namespace t = llamacpp_test;

namespace {

using dist = std::vector<double>;

// A sampler's current candidates as a distribution over the vocabulary (softmax of their logits).
dist candidates_law(common_sampler* smpl, std::size_t n_vocab) {
  const llama_token_data_array* cur = common_sampler_get_candidates(smpl, false);
  dist p(n_vocab, 0.0);
  double hi = -INFINITY;
  for (std::size_t j = 0; j < cur->size; ++j) hi = std::max(hi, static_cast<double>(cur->data[j].logit));
  double total = 0.0;
  for (std::size_t j = 0; j < cur->size; ++j) {
    const double w = std::exp(static_cast<double>(cur->data[j].logit) - hi);
    p[static_cast<std::size_t>(cur->data[j].id)] += w;
    total += w;
  }
  for (double& x : p) x /= total;
  return p;
}

dist logits_law(const std::vector<float>& logits) {
  dist p(logits.size(), 0.0);
  double hi = -INFINITY, total = 0.0;
  for (float l : logits) hi = std::max(hi, static_cast<double>(l));
  for (std::size_t i = 0; i < logits.size(); ++i) total += p[i] = std::exp(static_cast<double>(logits[i]) - hi);
  for (double& x : p) x /= total;
  return p;
}

struct sampler_deleter {
  void operator()(common_sampler* s) const { common_sampler_free(s); }
};
using sampler_ptr = std::unique_ptr<common_sampler, sampler_deleter>;

sampler_ptr make_sampler(common_params_sampling params, const std::string& gbnf,
                         const std::vector<token_id>& history) {
  if (!gbnf.empty()) params.grammar = common_grammar(COMMON_GRAMMAR_TYPE_USER, gbnf);
  sampler_ptr s(common_sampler_init(t::target().get(), params));
  REQUIRE(s != nullptr);
  for (token_id x : history) common_sampler_accept(s.get(), x, false);  // the prompt's tokens
  return s;
}

struct setting {
  const char* name;
  common_params_sampling params;
  bool differs;  // whether g differs from p on this row (the control must then fail)
};

// The target after test prompt 0: its context, the prompt's last row of logits and that row's
// index in the last batch, which each test case below reads.
struct prompt_row {
  const gguf_model& model = t::target();
  const std::vector<token_id>& prompt = t::prompts[0];
  const std::size_t n_vocab = static_cast<std::size_t>(llama_vocab_n_tokens(model.vocab()));
  context_model m{model, {.n_ctx = 256, .n_threads = 1}};
  const int idx = static_cast<int>(prompt.size()) - 1;
  std::vector<float> row;
  prompt_row() {
    std::vector<float> logits(prompt.size() * n_vocab);
    m.append(prompt, logits);
    row.assign(logits.end() - static_cast<std::ptrdiff_t>(n_vocab), logits.end());
  }
};

}  // namespace

TEST_CASE("llamacpp server row: stock llama-server's law under a grammar, for each sampler setting") {
  prompt_row r;
  const gguf_model& model = r.model;
  const std::size_t n_vocab = r.n_vocab;
  const std::vector<token_id>& prompt = r.prompt;
  llama_context* ctx = r.m.context();
  const int idx = r.idx;
  const std::vector<float>& raw = r.row;

  // A grammar forbidding every token with the first character of the row's most likely token.
  const token_id top = static_cast<token_id>(std::max_element(raw.begin(), raw.end()) - raw.begin());
  const std::string top_piece = piece(model, top);
  REQUIRE(!top_piece.empty());
  char ban = top_piece[0];
  INFO("the row's top token " << top << " '" << top_piece << "'; forbidden character '" << ban << "'");
  std::string cls;
  if (ban == ']' || ban == '\\' || ban == '^' || ban == '-' || ban == '"') cls += '\\';
  cls += ban;
  const std::string gbnf = "root ::= [^" + cls + "]+\n";

  common_params_sampling base;
  base.seed = 1234;
  base.no_perf = true;
  common_params_sampling top_p = base, min_p = base, bias = base, penalties = base, greedy = base;
  top_p.top_k = 0, top_p.top_p = 0.5f, top_p.min_p = 0.0f;
  min_p.top_k = 0, min_p.top_p = 1.0f, min_p.min_p = 0.2f;
  // The most likely valid token raised, the second most likely token lowered.
  std::vector<std::size_t> order(n_vocab);
  for (std::size_t i = 0; i < n_vocab; ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return raw[a] > raw[b]; });
  const auto best_valid = std::find_if(order.begin(), order.end(), [&](std::size_t x) {
    const std::string text = piece(model, static_cast<token_id>(x));
    return !text.empty() && text.find(ban) == std::string::npos;
  });
  REQUIRE(best_valid != order.end());
  bias.logit_bias = {{static_cast<llama_token>(*best_valid), 2.0f},
                     {static_cast<llama_token>(order[1]), -1.0f}};
  penalties.penalty_repeat = 1.3f;
  penalties.penalty_freq = 0.2f;
  greedy.temp = 0.0f;
  const std::vector<setting> settings{
      {"llama-server's defaults (top-k 40, top-p 0.95, min-p 0.05, T 0.8)", base, true},
      {"top-p 0.5", top_p, true},
      {"min-p 0.2", min_p, true},
      // On this row the biased chain keeps the same valid tokens with and without the grammar
      // first, so there p = g: the formula is checked, the control is not expected to fail.
      {"logit bias", bias, false},
      {"repetition and frequency penalties on the prompt", penalties, true},
      {"greedy", greedy, false},
  };

  for (const setting& s : settings) {
    INFO(s.name);
    const std::vector<token_id> history = s.params.penalty_repeat != 1.0f ? prompt : std::vector<token_id>{};
    // stock_row's row.
    auto smpl = make_sampler(s.params, gbnf, history);
    std::vector<float> out(n_vocab);
    specdec::llama_server::stock_row_workspace ws;
    ws.reserve(n_vocab);
    specdec::llama_server::stock_row(smpl.get(), ctx, idx, out, ws);
    const dist p = logits_law(out);

    // The formula from llama.cpp's own pieces.
    auto c_smpl = make_sampler(s.params, "", history);
    common_sampler_sample(c_smpl.get(), ctx, idx);
    const dist c = candidates_law(c_smpl.get(), n_vocab);
    auto g_smpl = make_sampler(s.params, gbnf, history);
    common_sampler_sample(g_smpl.get(), ctx, idx, /*grammar_first=*/true);
    const dist g = candidates_law(g_smpl.get(), n_vocab);
    llama_sampler* grammar = llama_sampler_init_grammar(model.vocab(), gbnf.c_str(), "root");
    REQUIRE(grammar != nullptr);
    double c_bad = 0.0;
    std::vector<bool> valid(n_vocab, false);
    for (std::size_t x = 0; x < n_vocab; ++x) {
      llama_token_data one{static_cast<llama_token>(x), 1.0f, 0.0f};
      llama_token_data_array arr{&one, 1, -1, false};
      llama_sampler_apply(grammar, &arr);
      valid[x] = one.logit != -INFINITY;
      if (!valid[x]) c_bad += c[x];
    }
    llama_sampler_free(grammar);
    CHECK_FALSE(valid[static_cast<std::size_t>(top)]);
    CHECK(c_bad > 0.01);  // the grammar forbids part of what the chain can draw: the case is reached
    double err = 0.0, g_gap = 0.0;
    for (std::size_t x = 0; x < n_vocab; ++x) {
      const double want = (valid[x] ? c[x] : 0.0) + c_bad * g[x];
      err = std::max(err, std::abs(p[x] - want));
      g_gap = std::max(g_gap, std::abs(g[x] - want));
    }
    CHECK(err < 1e-5);
    if (s.differs) CHECK(g_gap > 1e-3);  // the grammar-first row is another law here

    // Stock's own draws against p, and against g (the control, which must fail).
    if (s.params.temp > 0.0f) {
      auto stock = make_sampler(s.params, gbnf, history);
      std::vector<std::size_t> counts(n_vocab, 0);
      const std::size_t n = 20000;
      for (std::size_t i = 0; i < n; ++i)
        ++counts[static_cast<std::size_t>(common_sampler_sample(stock.get(), ctx, idx))];
      const auto fit = specdec::test::chi_square(counts, p);
      INFO("stock's draws against stock_row: " << fit.describe());
      CHECK(fit.pass());
      if (s.differs) {
        const auto control = specdec::test::chi_square(counts, g);
        INFO("stock's draws against the grammar-first row: " << control.describe());
        CHECK_FALSE(control.pass());
      }
    }
  }
}

// A draft model whose vocabulary is smaller than the target's (llama.cpp pairs them up to 128
// tokens apart): draft() reads only the draft's row and draws only ids the draft model has.
// The row handed to draft() is followed by 64 huge logits that a reader of the target's width
// would take for the row's best tokens.
TEST_CASE("llamacpp server draft: a draft model with a smaller vocabulary") {
  prompt_row r;
  const std::size_t n_vocab = r.n_vocab;
  const std::size_t n_draft = n_vocab - 64;
  std::vector<float>& row = r.row;
  std::fill(row.begin() + static_cast<std::ptrdiff_t>(n_draft), row.end(), 1e4f);

  for (const float temp : {0.0f, 1.0f}) {
    INFO("temperature " << temp);
    common_params_sampling params;  // no seed: the rejection rule, draft() draws
    params.temp = temp;
    params.top_k = 0;
    params.top_p = 1.0f;
    params.min_p = 0.0f;
    params.no_perf = true;
    auto smpl = make_sampler(params, "", {});
    specdec::llama_server::slot_speculation sd;
    sd.start(params, false, false, smpl.get(), n_vocab, n_draft);
    REQUIRE(sd.draws_drafts());
    std::size_t beyond = 0;
    for (int i = 0; i < 200; ++i) {
      sd.begin_draft(0);
      const llama_token x = sd.draft(smpl.get(), row.data(), 0, 0.0f);
      REQUIRE(x != LLAMA_TOKEN_NULL);
      if (static_cast<std::size_t>(x) >= n_draft) ++beyond;
    }
    CHECK(beyond == 0);
  }
}

// The draft model's row is processed as the request processes the target's (the chain's bias,
// penalties and truncations on the unscaled logits, then the temperature): a draft model whose
// row equals the target's draws from stock's law for it, so every such draft would be kept. The
// control, the same row at temperature 1 untruncated, must fail.
TEST_CASE("llamacpp server draft: q is the draft row through the request's chain") {
  prompt_row r;
  const std::size_t n_vocab = r.n_vocab;
  const std::vector<token_id>& prompt = r.prompt;
  const std::vector<float>& row = r.row;
  const int idx = r.idx;

  common_params_sampling params;  // llama-server's default chain at T = 0.8, a penalty, a bias
  params.temp = 0.8f;
  params.penalty_repeat = 1.3f;
  params.logit_bias.push_back({prompt.back(), 2.0f});
  params.no_perf = true;
  auto smpl = make_sampler(params, "", prompt);
  std::vector<float> law(n_vocab);
  specdec::llama_server::stock_row_workspace ws;
  ws.reserve(n_vocab);
  specdec::llama_server::stock_row(smpl.get(), r.m.context(), idx, law, ws);
  const dist p = logits_law(law);

  specdec::llama_server::slot_speculation sd;
  sd.start(params, false, false, smpl.get(), n_vocab, n_vocab);
  REQUIRE(sd.draws_drafts());
  std::vector<std::size_t> counts(n_vocab, 0);
  for (int i = 0; i < 4000; ++i) {
    sd.begin_draft(0);
    const llama_token x = sd.draft(smpl.get(), row.data(), 0, 0.0f);
    REQUIRE(x != LLAMA_TOKEN_NULL);
    ++counts[static_cast<std::size_t>(x)];
  }
  const auto fit = specdec::test::chi_square(counts, p);
  INFO("draft draws against the request's law for the row: " << fit.describe());
  CHECK(fit.pass());
  const auto control = specdec::test::chi_square(counts, logits_law(row));
  INFO("draft draws against the raw row: " << control.describe());
  CHECK_FALSE(control.pass());
}

// The keeper of emitted tokens' probabilities across requests: one asking for more n_probs than
// the request that sized its buffers gets all of them, right.
TEST_CASE("llamacpp server probs: a request asking for more n_probs than the one before") {
  std::vector<float> row(16);
  for (std::size_t i = 0; i < row.size(); ++i) row[i] = 0.25f * static_cast<float>(i);
  row[3] = -INFINITY;
  specdec::llama_server::emitted_probs_keeper keeper;
  keeper.start(1, row.size());
  keeper.clear();
  for (int i = 0; i < 5; ++i) keeper.keep_row(row.data(), 7);
  REQUIRE(keeper.has(4));
  CHECK(keeper.get(4).top.size() == 1);
  keeper.start(8, row.size());
  keeper.clear();
  CHECK_FALSE(keeper.has(0));
  keeper.keep_row(row.data(), 15);
  keeper.keep_row(row.data(), 14);
  const dist p = logits_law(row);
  for (std::size_t i = 0; i < 2; ++i) {
    const auto e = keeper.get(i);
    REQUIRE(e.top.size() == 8);
    CHECK(e.prob == Approx(p[15 - i]).epsilon(1e-5));
    for (std::size_t j = 0; j < 8; ++j) {
      CHECK(e.top[j].id == static_cast<llama_token>(15 - j));
      CHECK(e.top[j].p == Approx(p[15 - j]).epsilon(1e-5));
    }
  }
}

// Log-probabilities of emitted tokens (n_probs with post_sampling_probs): what the patched server
// reports for a token specdec drew (from the row it processed) equals what stock reports for the
// same row after its own draw (llama.cpp's candidates after the chain), for llama-server's default
// chain and for greedy decoding.
TEST_CASE("llamacpp server probs: an emitted token's post-sampling probabilities are stock's") {
  prompt_row r;
  const std::size_t n_vocab = r.n_vocab;
  llama_context* ctx = r.m.context();
  const int idx = r.idx;

  for (const float temp : {0.8f, 0.0f}) {
    INFO("temperature " << temp);
    common_params_sampling params;  // llama-server's defaults, no seed
    params.temp = temp;
    params.n_probs = 8;
    params.no_perf = true;
    auto stock = make_sampler(params, "", {});
    const llama_token stock_x = common_sampler_sample(stock.get(), ctx, idx);
    const llama_token_data_array* cur = common_sampler_get_candidates(stock.get(), true);

    auto smpl = make_sampler(params, "", {});
    auto saved = make_sampler(params, "", {});
    specdec::llama_server::slot_speculation sd;
    sd.start(params, false, false, smpl.get(), n_vocab, n_vocab);
    const std::vector<llama_token> out = sd.verify(smpl.get(), saved.get(), ctx, {idx}, {}, 0, false);
    REQUIRE(out.size() == 1);
    REQUIRE(sd.has_probs(0));
    const auto probs = sd.emitted_probability(0);
    std::size_t n_stock = 0;
    while (n_stock < std::min<std::size_t>(8, cur->size) && cur->data[n_stock].p != 0.0f) ++n_stock;
    REQUIRE(probs.top.size() == n_stock);
    CHECK(n_stock >= (temp > 0.0f ? 2u : 1u));
    for (std::size_t i = 0; i < n_stock; ++i) {
      CHECK(probs.top[i].id == cur->data[i].id);
      CHECK(std::abs(probs.top[i].p - cur->data[i].p) < 1e-6);
    }
    // The emitted token's own probability, as stock finds it among all its candidates.
    float stock_p = 0.0f;
    for (std::size_t j = 0; j < cur->size; ++j)
      if (cur->data[j].id == out[0]) stock_p = cur->data[j].p;
    CHECK(stock_p > 0.0f);
    CHECK(std::abs(probs.prob - stock_p) < 1e-6);
    if (temp == 0.0f) CHECK(out[0] == stock_x);
  }
}
