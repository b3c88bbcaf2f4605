// The reference engine on stories260K (grouped-query attention: 8 query heads on 4 KV heads)
// against an independent one: llama2.c's run.c forward() written down plainly below, scalar
// loops in double over weights read from the file by this test, one token at a time. The greedy
// run from "Once upon a time" must agree token for token and every logit within a tolerance, for
// llama2c::model (token by token and batched), llama2c::batch_model and the layer-skip drafts.
// Then the conformance kit on the model, its layer-skip drafts and the batch model.
#include "stories_common.hpp"  // Catch's runner, main(), the paths

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <iostream>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include <llama2c/engine/batch_model.hpp>
#include <llama2c/engine/model.hpp>
#include <llama2c/engine/tokenizer.hpp>
#include <specdec/decoder.hpp>
#include <specdec/math/sample.hpp>
#include <specdec/testing.hpp>
#include <specdec/testing/batch_checks.hpp>

namespace l2 = specdec::llama2c;
using specdec::token_id;
using namespace stories_test;

namespace {

// run.c, written down again: its Config, its TransformerWeights read in the file's order, and
// forward() for one token at one position, in double. Nothing here comes from the engine.
class run_c {
 public:
  // `layers`: run the first `layers` blocks (0 = all), then the final norm and the classifier,
  // as a layer-skip draft does. `swap_kv_heads`: read KV head h % n_kv_heads for query head h
  // instead of h / kv_mul, the grouped-query bug the comparison must be able to see.
  explicit run_c(const std::filesystem::path& path, int layers = 0, bool swap_kv_heads = false)
      : swap_(swap_kv_heads) {
    std::ifstream in(path, std::ios::binary);
    std::int32_t h[7];
    in.read(reinterpret_cast<char*>(h), sizeof h);
    dim = h[0], hidden = h[1], n_layers = h[2], n_heads = h[3], n_kv_heads = h[4];
    shared = h[5] > 0;
    vocab = std::abs(h[5]), seq_len = h[6];
    head_size = dim / n_heads, kv_dim = dim * n_kv_heads / n_heads, kv_mul = n_heads / n_kv_heads;
    const auto read = [&](std::vector<float>& t, long n) {
      t.resize(static_cast<std::size_t>(n));
      in.read(reinterpret_cast<char*>(t.data()), static_cast<std::streamsize>(n * 4));
    };
    const long L = n_layers;
    read(emb, long{vocab} * dim);
    read(rms_att, L * dim);
    read(wq, L * dim * dim);
    read(wk, L * dim * kv_dim);
    read(wv, L * dim * kv_dim);
    read(wo, L * dim * dim);
    read(rms_ffn, L * dim);
    read(w1, L * dim * hidden);
    read(w2, L * hidden * dim);
    read(w3, L * dim * hidden);
    read(rms_final, dim);
    std::vector<float> freq_cis;  // freq_cis_real and freq_cis_imag: run.c skips them too
    read(freq_cis, long{seq_len} * head_size);
    if (shared) {
      wcls = emb;
    } else {
      read(wcls, long{vocab} * dim);
    }
    if (!in) throw std::runtime_error("run_c: cannot read " + path.string());
    in.peek();
    if (!in.eof()) throw std::runtime_error("run_c: bytes left over in " + path.string());
    run_layers = layers == 0 ? n_layers : layers;
    key_cache.assign(static_cast<std::size_t>(L * seq_len * kv_dim), 0.0);
    value_cache = key_cache;
  }

  // forward(token, pos) of run.c: the logits after `token` at position `pos` (positions fed in
  // order; an earlier position may be fed again to rewind).
  std::vector<double> forward(int token, int pos) {
    std::vector<double> x(dim), xb(dim), xb2(dim), q(dim), k(kv_dim), v(kv_dim), hb(hidden),
        hb2(hidden), att(static_cast<std::size_t>(pos) + 1);
    for (int i = 0; i < dim; ++i) x[i] = emb[idx(token) * dim + i];
    for (int l = 0; l < run_layers; ++l) {
      rmsnorm(xb, x, &rms_att[idx(l) * dim]);
      matmul(q, xb, &wq[idx(l) * dim * dim], dim, dim);
      matmul(k, xb, &wk[idx(l) * dim * kv_dim], dim, kv_dim);
      matmul(v, xb, &wv[idx(l) * dim * kv_dim], dim, kv_dim);
      // RoPE as run.c: pair (i, i + 1) of each head turns by pos / 10000^(head_dim / head_size),
      // the angle computed in float; q always, k while i < kv_dim.
      for (int i = 0; i < dim; i += 2) {
        const int head_dim = i % head_size;
        const float freq = 1.0f / std::pow(10000.0f, static_cast<float>(head_dim) /
                                                         static_cast<float>(head_size));
        const float val = static_cast<float>(pos) * freq;
        const double fcr = std::cos(static_cast<double>(val)), fci = std::sin(static_cast<double>(val));
        const int rotn = i < kv_dim ? 2 : 1;
        for (int r = 0; r < rotn; ++r) {
          std::vector<double>& vec = r == 0 ? q : k;
          const double v0 = vec[i], v1 = vec[i + 1];
          vec[i] = v0 * fcr - v1 * fci;
          vec[i + 1] = v0 * fci + v1 * fcr;
        }
      }
      const std::size_t loff = idx(l) * seq_len * kv_dim;
      for (int i = 0; i < kv_dim; ++i) {
        key_cache[loff + idx(pos) * kv_dim + i] = k[i];
        value_cache[loff + idx(pos) * kv_dim + i] = v[i];
      }
      // Multi-head attention; query head h reads KV head h / kv_mul.
      for (int h = 0; h < n_heads; ++h) {
        const int kvh = swap_ ? h % n_kv_heads : h / kv_mul;
        for (int t = 0; t <= pos; ++t) {
          double score = 0;
          for (int i = 0; i < head_size; ++i)
            score += q[h * head_size + i] * key_cache[loff + idx(t) * kv_dim + kvh * head_size + i];
          att[t] = score / std::sqrt(static_cast<double>(head_size));
        }
        softmax(att);
        for (int i = 0; i < head_size; ++i) {
          double sum = 0;
          for (int t = 0; t <= pos; ++t)
            sum += att[t] * value_cache[loff + idx(t) * kv_dim + kvh * head_size + i];
          xb[h * head_size + i] = sum;
        }
      }
      matmul(xb2, xb, &wo[idx(l) * dim * dim], dim, dim);
      for (int i = 0; i < dim; ++i) x[i] += xb2[i];
      // FFN: w2(silu(w1 x) * w3 x).
      rmsnorm(xb, x, &rms_ffn[idx(l) * dim]);
      matmul(hb, xb, &w1[idx(l) * dim * hidden], dim, hidden);
      matmul(hb2, xb, &w3[idx(l) * dim * hidden], dim, hidden);
      for (int i = 0; i < hidden; ++i) hb[i] = hb[i] / (1.0 + std::exp(-hb[i])) * hb2[i];
      matmul(xb, hb, &w2[idx(l) * hidden * dim], hidden, dim);
      for (int i = 0; i < dim; ++i) x[i] += xb[i];
    }
    rmsnorm(xb, x, rms_final.data());
    std::vector<double> logits(vocab);
    matmul(logits, xb, wcls.data(), dim, vocab);
    return logits;
  }

  int dim, hidden, n_layers, n_heads, n_kv_heads, vocab, seq_len, head_size, kv_dim, kv_mul;
  bool shared;

 private:
  static std::size_t idx(int i) { return static_cast<std::size_t>(i); }
  static void rmsnorm(std::vector<double>& o, const std::vector<double>& x, const float* w) {
    double ss = 0;
    for (const double xi : x) ss += xi * xi;
    ss = 1.0 / std::sqrt(ss / static_cast<double>(x.size()) + 1e-5);
    for (std::size_t i = 0; i < x.size(); ++i) o[i] = w[i] * (ss * x[i]);
  }
  static void softmax(std::vector<double>& x) {
    const double m = *std::max_element(x.begin(), x.end());
    double sum = 0;
    for (double& xi : x) sum += xi = std::exp(xi - m);
    for (double& xi : x) xi /= sum;
  }
  // out (d) = W (d x n, row-major) x (n), as run.c's matmul.
  static void matmul(std::vector<double>& out, const std::vector<double>& x, const float* w, int n,
                     int d) {
    for (int i = 0; i < d; ++i) {
      double val = 0;
      for (int j = 0; j < n; ++j) val += w[idx(i) * n + j] * x[j];
      out[i] = val;
    }
  }

  bool swap_;
  int run_layers;
  std::vector<float> emb, rms_att, wq, wk, wv, wo, rms_ffn, w1, w2, w3, rms_final, wcls;
  std::vector<double> key_cache, value_cache;
};

std::size_t argmax(const std::vector<double>& row) {
  return static_cast<std::size_t>(std::max_element(row.begin(), row.end()) - row.begin());
}

// run.c's greedy loop: the prompt (BOS first) is fed, then `new_tokens` argmax choices. Returns
// the whole sequence and every position's logits (row i: after sequence[i]).
struct greedy_run {
  std::vector<token_id> sequence;
  std::vector<std::vector<double>> logits;
  double smallest_margin = 1e30;  // top-1 minus top-2 at the generated positions
};

greedy_run run_c_greedy(run_c& r, const std::vector<token_id>& prompt, std::size_t new_tokens) {
  greedy_run g;
  g.sequence = prompt;
  for (std::size_t pos = 0; pos + 1 < prompt.size() + new_tokens; ++pos) {
    g.logits.push_back(r.forward(g.sequence[pos], static_cast<int>(pos)));
    if (pos + 1 < prompt.size()) continue;
    auto row = g.logits.back();
    const std::size_t best = argmax(row);
    const double top = row[best];
    row[best] = -1e30;
    g.smallest_margin = std::min(g.smallest_margin, top - row[argmax(row)]);
    g.sequence.push_back(static_cast<token_id>(best));
  }
  return g;
}

// The largest |engine - run_c| over rows [0, rows) of `engine` (rows x vocab).
double max_diff(const greedy_run& g, std::span<const float> engine, std::size_t vocab) {
  double d = 0;
  for (std::size_t i = 0; i * vocab < engine.size(); ++i)
    for (std::size_t j = 0; j < vocab; ++j)
      d = std::max(d, std::abs(static_cast<double>(engine[i * vocab + j]) - g.logits[i][j]));
  return d;
}

constexpr std::size_t new_tokens = 100;
constexpr double tolerance = 1e-4;  // logits reach about 15; the engine computes in float

struct fixture {
  std::shared_ptr<const l2::weights> w = l2::load_checkpoint(checkpoint_path);
  l2::tokenizer tok{tokenizer_path, w->cfg().vocab_size};
  std::vector<token_id> prompt = tok.encode(prompts[0]);
};

// The run.c greedy run from prompts[0], computed once.
const greedy_run& reference() {
  static const greedy_run g = [] {
    fixture f;
    run_c r(checkpoint_path);
    return run_c_greedy(r, f.prompt, new_tokens);
  }();
  return g;
}

}  // namespace

TEST_CASE("stories260K: the checkpoint has grouped-query attention, as the tests assume") {
  fixture f;
  const auto& c = f.w->cfg();
  CHECK(c.n_layers == 5);
  CHECK(c.n_heads == 8);
  CHECK(c.n_kv_heads == 4);  // each KV head serves two query heads
  CHECK(c.n_kv_heads < c.n_heads);
  CHECK(c.kv_dim() == 32);
  CHECK(c.vocab_size == 512);
  CHECK(c.seq_len == 512);
  CHECK(c.shared_classifier);
  const run_c r(checkpoint_path);
  CHECK(r.kv_mul == 2);
  CHECK(f.prompt == std::vector<token_id>{1, 403, 407, 261, 378});
}

TEST_CASE("stories260K: greedy output and logits equal run.c's forward, token by token") {
  fixture f;
  const auto& g = reference();
  const std::size_t v = f.w->cfg().vocab_size;
  static const bool printed = [&] {  // once, not once per section
    std::cout << "stories260K, run.c greedy from \"" << prompts[0] << "\" (" << new_tokens
              << " new tokens): " << f.tok.decode(g.sequence) << "\n"
              << "stories260K: smallest top-1 - top-2 logit margin on the greedy path: "
              << g.smallest_margin << "\n";
    return true;
  }();
  (void)printed;
  REQUIRE(g.smallest_margin > 10 * tolerance);  // so equal tokens follow from close logits
  CHECK(f.tok.decode(g.sequence).rfind("Once upon a time", 0) == 0);

  SECTION("llama2c::model, one token per append (as generate_autoregressive)") {
    l2::model m(f.w, {.threads = 1});
    specdec::generate_options o;
    o.max_new_tokens = new_tokens;
    o.sampling.temperature = 0.0f;
    o.stop_tokens = {};
    const auto out = specdec::generate_autoregressive(m, f.prompt, o).tokens;
    CHECK(out == std::vector<token_id>(g.sequence.begin() + static_cast<long>(f.prompt.size()),
                                       g.sequence.end()));
    m.truncate(0);
    std::vector<float> rows(g.logits.size() * v);
    for (std::size_t i = 0; i < g.logits.size(); ++i)
      m.append(std::span(g.sequence).subspan(i, 1), std::span(rows).subspan(i * v, v));
    const double d = max_diff(g, rows, v);
    std::cout << "stories260K: max |model token by token - run.c| over " << g.logits.size()
              << " positions: " << d << "\n";
    CHECK(d < tolerance);
  }
  SECTION("llama2c::model, one batched append; on two threads") {
    l2::model m(f.w, {.threads = 2});
    std::vector<float> rows(g.logits.size() * v);
    m.append(std::span(g.sequence).first(g.logits.size()), rows);
    const double d = max_diff(g, rows, v);
    std::cout << "stories260K: max |model batched - run.c|: " << d << "\n";
    CHECK(d < tolerance);
  }
  SECTION("llama2c::batch_model, beside another sequence") {
    l2::batch_model m(f.w, {.max_sequences = 2, .max_batch_tokens = 256, .threads = 1});
    const auto a = m.create_sequence(), b = m.create_sequence();
    std::vector<float> rows(g.logits.size() * v), other(7 * v);
    const std::vector<specdec::batch_entry> batch{
        {b, std::span(g.sequence).first(7), {}, other},
        {a, std::span(g.sequence).first(g.logits.size()), {}, rows}};
    m.score(batch);
    const double d = max_diff(g, rows, v);
    std::cout << "stories260K: max |batch_model - run.c|: " << d << "\n";
    CHECK(d < tolerance);
  }
}

TEST_CASE("stories260K: the comparison sees a wrong grouped-query mapping") {
  // Reading KV head h % 4 instead of h / 2 for query head h moves the logits far past the
  // tolerance: the GQA path is exercised, not merely tolerated.
  fixture f;
  run_c wrong(checkpoint_path, 0, true);
  const auto& g = reference();
  double d = 0;
  for (std::size_t pos = 0; pos < 20; ++pos) {
    const auto row = wrong.forward(g.sequence[pos], static_cast<int>(pos));
    for (std::size_t j = 0; j < row.size(); ++j) d = std::max(d, std::abs(row[j] - g.logits[pos][j]));
  }
  std::cout << "stories260K: max |kv head h % n_kv_heads - run.c| over 20 positions: " << d << "\n";
  CHECK(d > 1000 * tolerance);
}

TEST_CASE("stories260K: layer-skip drafts equal run.c's first layers, then its classifier") {
  fixture f;
  const auto& g = reference();
  const std::size_t v = f.w->cfg().vocab_size, n = 40;
  const l2::model target(f.w, {.threads = 1});
  for (int layers = 1; layers <= 4; ++layers) {
    run_c r(checkpoint_path, layers);
    greedy_run teacher;  // run.c's first layers, fed the full model's greedy text
    for (std::size_t pos = 0; pos < n; ++pos)
      teacher.logits.push_back(r.forward(g.sequence[pos], static_cast<int>(pos)));
    l2::layer_skip_draft d(target, static_cast<std::size_t>(layers));
    std::vector<float> rows(n * v);
    d.append(std::span(g.sequence).first(n), rows);
    std::size_t agree = 0;
    for (std::size_t i = 0; i < n; ++i)
      agree += argmax(teacher.logits[i]) == argmax(g.logits[i]);
    const double diff = max_diff(teacher, rows, v);
    std::cout << "stories260K: layer-skip draft of " << layers << " of 5 layers: max |draft - "
              << "run.c| " << diff << "; agrees with the full model's greedy choice at " << agree
              << " / " << n << " positions\n";
    CHECK(diff < tolerance);
  }
}

TEST_CASE("stories260K: the conformance kit passes on the model, its drafts and the batch model") {
  fixture f;
  specdec::testing::conformance_options o;
  o.tokens.assign(reference().sequence.begin(), reference().sequence.begin() + 32);
  o.tolerance = 1e-4f;
  SECTION("llama2c::model (tree model, hidden rows, prefill), from a factory") {
    const auto rep = specdec::testing::run_all([&] { return l2::model(f.w, {.threads = 1}); }, o);
    std::cout << "stories260K conformance (model):\n" << rep.message;
    CHECK(rep.ok);
    CHECK(rep.checks.size() == 10);
  }
  SECTION("llama2c::model, one instance on two threads") {
    l2::model m(f.w, {.threads = 2});
    const auto rep = specdec::testing::run_all(m, o);
    INFO(rep.message);
    CHECK(rep.ok);
  }
  for (std::size_t layers : {2u, 4u}) {
    DYNAMIC_SECTION("layer-skip draft with " << layers << " layers") {
      const l2::model target(f.w, {.threads = 1});
      const auto rep = specdec::testing::run_all(
          [&] { return l2::layer_skip_draft(target, layers); }, o);
      INFO(rep.message);
      CHECK(rep.ok);
    }
  }
  SECTION("llama2c::batch_model: rows bit-identical to scoring alone, trees, prefill") {
    l2::batch_model m(f.w, {.max_sequences = 16, .max_batch_tokens = 128, .threads = 1});
    const auto rep = specdec::testing::run_batch_checks(m, o);
    std::cout << "stories260K conformance (batch model):\n" << rep.message;
    CHECK(rep.ok);
    CHECK(rep.checks.size() == 6);
  }
}
