// Draft heads on the real model (aidreams260K) and on a target reshaped from it: the engine's
// hidden rows pass the conformance kit, training is deterministic for a seed, widened heads
// compute the same logits, and greedy speculative decoding with Medusa heads or the EAGLE-style
// predictor (with and without its attention layer) equals plain greedy decoding token for token
// (chains and trees, several prompts); the library's attention drafts what the trainer computes.
#include <unistd.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "common.hpp"
#include "test_heads.hpp"

#include <llama2c/training/eagle_attn_train.hpp>
#include <llama2c/engine/heads_file.hpp>
#include <llama2c/training/heads_train.hpp>
#include <llama2c/engine/model.hpp>
#include <llama2c/tools/reshape.hpp>
#include <llama2c/engine/tokenizer.hpp>
#include <specdec/decoder.hpp>
#include <specdec/draft/eagle_drafter.hpp>
#include <specdec/draft/hidden_capture.hpp>
#include <specdec/draft/medusa_drafter.hpp>
#include <specdec/testing.hpp>

namespace fs = std::filesystem;
namespace l2 = specdec::llama2c;
using specdec::token_id;
using namespace llama2c_test;

namespace {

struct temp_dir {
  fs::path path = fs::temp_directory_path() / ("specdec_heads_test_" + std::to_string(::getpid()));
  temp_dir() { fs::create_directories(path); }
  ~temp_dir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
};

temp_dir& scratch() {
  static temp_dir dir;
  return dir;
}

std::shared_ptr<const l2::weights> small() {
  static auto w = l2::load_checkpoint(checkpoint_path);
  return w;
}

// aidreams260K reshaped to the 15M shape (dim 288: the heads are widened 64 -> 288).
std::shared_ptr<const l2::weights> reshaped() {
  static std::shared_ptr<const l2::weights> w = [] {
    const fs::path out = scratch().path / "15M.bin";
    l2::reshape_checkpoint(checkpoint_path, out, l2::shape_named("15M"));
    return l2::load_checkpoint(out);
  }();
  return w;
}

// Tiny training runs (seconds): heads that agree with the target often enough to be exercised.
// `attention`: the EAGLE-style predictor with its attention layer (2 heads of width 8).
const l2::heads_record& trained(l2::heads_kind kind, bool attention = false) {
  return llama2c_test::trained_heads({.weights = small(), .steps = 150}, kind, attention);
}

std::vector<std::vector<token_id>> prompts() {
  const l2::tokenizer tok(tokenizer_path, small()->cfg().vocab_size);
  return {tok.encode("I dreamed"), tok.encode("The nodes"), tok.encode("A flower of vectors")};
}

// Greedy decoding with heads (chains and trees) equals plain greedy decoding on `w`.
void check_greedy(const std::shared_ptr<const l2::weights>& w, l2::heads_kind kind,
                  bool attention = false) {
  l2::model target(w, {.threads = 1}), plain(w, {.threads = 1});
  specdec::hidden_capture<l2::model> cap(target);
  auto rec = trained(kind, attention);
  l2::fit_heads(rec, w->cfg(), "trained");
  specdec::generate_options o;
  o.max_new_tokens = 60;
  o.sampling.temperature = 0.0f;
  o.stop_tokens = {1, 2};
  const auto run = [&](auto& drafter) {
    specdec::speculative_decoder decoder(cap, drafter);
    std::size_t accepted = 0;
    for (const auto& prompt : prompts()) {
      const auto want = specdec::generate_autoregressive(plain, prompt, o).tokens;
      for (const auto& tree : std::vector<std::vector<std::size_t>>{{}, {3, 2, 2}, {4, 4, 4}}) {
        o.tree = tree;
        o.draft_length = 3;
        const auto r = decoder.generate(prompt, o);
        INFO("prompt of " << prompt.size() << " tokens, tree of depth " << tree.size());
        CHECK(r.tokens == want);
        accepted += r.stats.accepted_tokens;
      }
    }
    CHECK(accepted > 0);
  };
  if (kind == l2::heads_kind::medusa) {
    specdec::medusa_drafter drafter(cap, rec.medusa, w->classifier(), {.max_nodes = 10});
    run(drafter);
  } else {
    specdec::eagle_drafter drafter(cap, rec.eagle, w->classifier(), w->token_embedding(),
                                   {.max_nodes = 10, .expand = 3});
    run(drafter);
  }
}

}  // namespace

TEST_CASE("heads: the engine's hidden rows pass the conformance kit") {
  specdec::testing::conformance_options o;
  o.tolerance = 1e-4f;
  const auto rep = specdec::testing::run_all([] { return l2::model(small(), {.threads = 1}); }, o);
  INFO(rep.message);
  CHECK(rep.ok);
  CHECK(rep.message.find("ok   hidden_rows") != std::string::npos);
}

TEST_CASE("heads: the hidden row is the classifier's input") {
  l2::model m(small(), {.threads = 1});
  const auto prompt = prompts()[0];
  std::vector<float> logits(prompt.size() * m.vocab_size()), hidden(prompt.size() * m.hidden_size());
  m.append(prompt, logits, hidden);
  const specdec::logits_view h(hidden.data(), static_cast<Eigen::Index>(prompt.size()),
                               static_cast<Eigen::Index>(m.hidden_size()));
  const specdec::logits_view l(logits.data(), static_cast<Eigen::Index>(prompt.size()),
                               static_cast<Eigen::Index>(m.vocab_size()));
  const specdec::row_matrix again = h * small()->classifier().transpose();
  CHECK((again - l).cwiseAbs().maxCoeff() < 1e-4f);
}

TEST_CASE("heads: training is deterministic for a seed, and the file round-trips") {
  l2::model m(small(), {.threads = 1});
  const auto corpus = l2::train::generate_corpus(m, {.sequences = 20, .seed = 9});
  l2::train::train_options o;
  o.steps = 30;
  o.heads = 2;
  l2::train::train_report r1, r2;
  auto a = l2::train::train_heads(m, corpus, o, r1);
  auto b = l2::train::train_heads(m, corpus, o, r2);
  a.train_seconds = b.train_seconds = 0.0f;
  CHECK(l2::heads_bytes(a) == l2::heads_bytes(b));
  const fs::path file = scratch().path / "medusa.heads";
  l2::save_heads(file, a);
  CHECK(l2::heads_bytes(l2::read_heads(file)) == l2::heads_bytes(a));
  REQUIRE_THROWS_WITH(l2::read_heads(scratch().path / "none.heads"),
                      Catch::Contains("none.heads': cannot be read"));
}

TEST_CASE("heads: widened heads give the small model's head logits on the reshaped target") {
  for (auto kind : {l2::heads_kind::medusa, l2::heads_kind::eagle}) {
    auto wide = trained(kind);
    l2::fit_heads(wide, reshaped()->cfg(), "trained");
    const auto& narrow = trained(kind);
    l2::model s(small(), {.threads = 1}), big(reshaped(), {.threads = 1});
    const auto prompt = prompts()[0];
    std::vector<float> ls(prompt.size() * s.vocab_size()), hs(prompt.size() * s.hidden_size());
    std::vector<float> lb(prompt.size() * big.vocab_size()), hb(prompt.size() * big.hidden_size());
    s.append(prompt, ls, hs);
    big.append(prompt, lb, hb);
    const Eigen::Map<const specdec::prob_row> xs(hs.data() + (prompt.size() - 1) * s.hidden_size(),
                                                 static_cast<Eigen::Index>(s.hidden_size()));
    const Eigen::Map<const specdec::prob_row> xb(hb.data() + (prompt.size() - 1) * big.hidden_size(),
                                                 static_cast<Eigen::Index>(big.hidden_size()));
    specdec::prob_row r, a, b;
    if (kind == l2::heads_kind::medusa) {
      for (std::size_t k = 0; k < narrow.medusa.size(); ++k) {
        specdec::medusa_logits(narrow.medusa, k, xs, small()->classifier(), r, a);
        specdec::medusa_logits(wide.medusa, k, xb, reshaped()->classifier(), r, b);
        CHECK((a - b).cwiseAbs().maxCoeff() < 1e-3f);
      }
    } else {
      const auto step = [](const specdec::eagle_weights& e, const auto& x, const l2::weights& w,
                           token_id t) {
        specdec::row_matrix z, next;
        const specdec::row_matrix f = x * e.input_scale;
        const specdec::row_matrix emb = w.token_embedding().row(t);
        specdec::eagle_step(e, f, emb, z, next);
        return specdec::prob_row((next / e.input_scale) * w.classifier().transpose());
      };
      a = step(narrow.eagle, xs, *small(), prompt.back());
      b = step(wide.eagle, xb, *reshaped(), prompt.back());
      CHECK((a - b).cwiseAbs().maxCoeff() < 1e-3f);
    }
  }
}

TEST_CASE("heads: greedy decoding with Medusa heads equals plain greedy decoding") {
  SECTION("aidreams260K") { check_greedy(small(), l2::heads_kind::medusa); }
  SECTION("reshaped to 15M") { check_greedy(reshaped(), l2::heads_kind::medusa); }
}

TEST_CASE("heads: greedy decoding with the EAGLE-style predictor equals plain greedy decoding") {
  SECTION("aidreams260K") { check_greedy(small(), l2::heads_kind::eagle); }
  SECTION("reshaped to 15M") { check_greedy(reshaped(), l2::heads_kind::eagle); }
  SECTION("with attention, aidreams260K") { check_greedy(small(), l2::heads_kind::eagle, true); }
  SECTION("with attention, reshaped to 15M") {
    check_greedy(reshaped(), l2::heads_kind::eagle, true);
  }
}

namespace {

// The greedy chain of k drafts the library's eagle_drafter proposes after `prompt` on `w`.
std::vector<token_id> library_chain(const std::shared_ptr<const l2::weights>& w,
                                    const l2::heads_record& rec,
                                    const std::vector<token_id>& prompt, std::size_t k) {
  l2::model target(w, {.threads = 1});
  specdec::hidden_capture<l2::model> cap(target);
  std::vector<float> logits((prompt.size() - 1) * target.vocab_size());
  cap.append(std::span<const token_id>(prompt.data(), prompt.size() - 1), logits);
  specdec::eagle_drafter drafter(cap, rec.eagle, w->classifier(), w->token_embedding());
  specdec::rng gen(1);
  specdec::draft d;
  drafter.propose(prompt, k, specdec::sampling_params{.temperature = 0.0f}, gen, d);
  return d.tokens;
}

}  // namespace

TEST_CASE("heads: the library's attention layer drafts what the trainer's step computes") {
  const auto& rec = trained(l2::heads_kind::eagle, true);
  REQUIRE(rec.eagle.attention.enabled());
  // The trained parameters again, for the trainer's own one-row step.
  l2::train::eagle_attn_params<float> p;
  p.mlp.w1 = rec.eagle.w1;
  p.mlp.b1 = rec.eagle.b1;
  p.mlp.w2 = rec.eagle.w2;
  p.mlp.b2 = rec.eagle.b2;
  p.wq = rec.eagle.attention.wq;
  p.wk = rec.eagle.attention.wk;
  p.wv = rec.eagle.attention.wv;
  p.wo = rec.eagle.attention.wo;
  p.heads = rec.eagle.attention.heads;
  p.rope = rec.eagle.attention.rope;
  const std::size_t k = 6;
  for (const auto& prompt : prompts()) {
    REQUIRE(prompt.size() >= 3);
    // The trainer's recurrence: true rows for the context, its own predictions after it.
    l2::model m(small(), {.threads = 1});
    const std::size_t h = prompt.size(), d = m.hidden_size();
    std::vector<float> logits(h * m.vocab_size()), hidden(h * d);
    m.append(prompt, logits, hidden);
    using row = Eigen::Matrix<float, 1, Eigen::Dynamic>;
    const auto hidden_row = [&](std::size_t pos) {
      return row(Eigen::Map<const row>(hidden.data() + pos * d, static_cast<Eigen::Index>(d)));
    };
    const auto A = rec.eagle.attention.wq.rows();
    l2::train::mat<float> keys(static_cast<Eigen::Index>(h + k), A), values(keys.rows(), A);
    for (std::size_t pos = 0; pos + 2 < h; ++pos) {  // context rows, written by a step each
      const row emb = small()->token_embedding().row(prompt[pos + 1]);
      (void)l2::train::eagle_attn_step<float>(p, hidden_row(pos), emb, pos, keys, values);
    }
    row feature = hidden_row(h - 2);
    token_id t = prompt.back();
    std::vector<token_id> want;
    for (std::size_t j = 0; j < k; ++j) {
      const row emb = small()->token_embedding().row(t);
      feature = l2::train::eagle_attn_step<float>(p, feature, emb, h - 2 + j, keys, values);
      const row scores = feature * small()->classifier().transpose();
      Eigen::Index best;
      scores.maxCoeff(&best);
      t = static_cast<token_id>(best);
      want.push_back(t);
    }
    INFO("prompt of " << h << " tokens");
    CHECK(library_chain(small(), rec, prompt, k) == want);
    // Widened for the reshaped target, the layer drafts the same tokens there.
    auto wide = rec;
    l2::fit_heads(wide, reshaped()->cfg(), "trained");
    CHECK(library_chain(reshaped(), wide, prompt, k) == want);
  }
}

TEST_CASE("heads: a heads file with an attention layer round-trips") {
  const auto& rec = trained(l2::heads_kind::eagle, true);
  const fs::path file = scratch().path / "attn.heads";
  l2::save_heads(file, rec);
  const auto back = l2::read_heads(file);
  CHECK(l2::heads_bytes(back) == l2::heads_bytes(rec));
  CHECK(back.eagle.attention.heads == 2);
  CHECK(back.eagle.attention.width() == 8);
  CHECK(back.eagle.attention.rope);
  CHECK(l2::heads_summary(back).find("attention 2 heads x 8 (rotary)") != std::string::npos);
}
