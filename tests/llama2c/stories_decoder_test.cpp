// Speculative decoding on stories260K, the second real model: greedy speculative output equals
// plain greedy output token for token with the layer-skip draft (chains and trees) and with draft
// heads trained here on the model's own generated stories (Medusa, the EAGLE-style predictor with
// and without its attention layer); the drafts are accepted often enough to show the heads
// learned something.
#include "stories_common.hpp"  // Catch's runner, main(), the paths and prompts
#include "test_heads.hpp"

#include <cstddef>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include <llama2c/engine/heads_file.hpp>
#include <llama2c/engine/model.hpp>
#include <llama2c/engine/tokenizer.hpp>
#include <llama2c/training/eagle_attn_train.hpp>
#include <llama2c/training/heads_train.hpp>
#include <specdec/specdec.hpp>

namespace l2 = specdec::llama2c;
using specdec::token_id;
using namespace stories_test;

namespace {

std::shared_ptr<const l2::weights> weights() {
  static const auto w = l2::load_checkpoint(checkpoint_path);
  return w;
}

std::vector<std::vector<token_id>> encoded_prompts() {
  const l2::tokenizer tok(tokenizer_path, weights()->cfg().vocab_size);
  std::vector<std::vector<token_id>> out;
  for (const auto& p : prompts) out.push_back(tok.encode(p));
  return out;
}

specdec::generate_options greedy(std::size_t n) {
  specdec::generate_options o;
  o.max_new_tokens = n;
  o.sampling.temperature = 0.0f;
  return o;
}

// Plain greedy decoding of every prompt (one token per append).
std::vector<std::vector<token_id>> plain_outputs(std::size_t n) {
  l2::model plain(weights(), {.threads = 1});
  std::vector<std::vector<token_id>> out;
  for (const auto& prompt : encoded_prompts())
    out.push_back(specdec::generate_autoregressive(plain, prompt, greedy(n)).tokens);
  return out;
}

// Short training runs on text the model generates itself (128-token stories: the context is
// capped so the corpus stays small), a few seconds each.
const l2::heads_record& trained(l2::heads_kind kind, bool attention = false) {
  return llama2c_test::trained_heads({.weights = weights(), .max_context = 128, .steps = 300},
                                     kind, attention);
}

constexpr std::size_t n_new = 80;

}  // namespace

TEST_CASE("stories260K decoder: greedy speculative decoding with the layer-skip draft equals plain") {
  const auto want = plain_outputs(n_new);
  const auto ps = encoded_prompts();
  l2::model target(weights(), {.threads = 1});
  for (std::size_t layers : {2u, 4u}) {
    l2::layer_skip_draft draft(target, layers);
    specdec::model_drafter drafter(draft);
    specdec::speculative_decoder decoder(target, drafter);
    std::size_t accepted = 0, drafted = 0;
    for (std::size_t p = 0; p < ps.size(); ++p) {
      auto o = greedy(n_new);
      for (std::size_t k : {1u, 3u, 6u}) {
        o.draft_length = k;
        const auto r = decoder.generate(ps[p], o);
        INFO("prompt \"" << prompts[p] << "\", layer-skip L = " << layers << ", K = " << k);
        CHECK(r.tokens == want[p]);
        if (k == 3) {
          accepted += r.stats.accepted_tokens;
          drafted += r.stats.drafted_tokens;
        }
      }
      for (const char* shape : {"2x2", "4x2x2"}) {
        o.tree = specdec::parse_branching(shape);
        const auto r = decoder.generate(ps[p], o);
        INFO("prompt \"" << prompts[p] << "\", layer-skip L = " << layers << ", tree " << shape);
        CHECK(r.tokens == want[p]);
      }
    }
    const double rate = static_cast<double>(accepted) / static_cast<double>(drafted);
    std::cout << "stories260K: layer-skip draft of " << layers << " of 5 layers, K = 3: "
              << accepted << " of " << drafted << " drafts accepted ("
              << rate << ")\n";
    if (layers == 4) CHECK(rate > 0.2);  // a sanity bound: 4 of 5 layers often agree
  }
  SECTION("prompt lookup") {
    specdec::ngram_drafter lookup({.min_ngram = 1, .max_ngram = 4});
    specdec::speculative_decoder decoder(target, lookup);
    auto o = greedy(n_new);
    o.draft_length = 8;
    for (std::size_t p = 0; p < ps.size(); ++p) CHECK(decoder.generate(ps[p], o).tokens == want[p]);
  }
}

namespace {

// Greedy decoding with trained heads (chains and trees) equals plain greedy decoding; returns
// the accepted drafts per target call over the prompts with a chain of 3.
double check_heads(l2::heads_kind kind, bool attention) {
  const auto want = plain_outputs(n_new);
  const auto ps = encoded_prompts();
  l2::model target(weights(), {.threads = 1});
  specdec::hidden_capture<l2::model> cap(target);
  auto rec = trained(kind, attention);
  l2::fit_heads(rec, weights()->cfg(), "trained");
  std::size_t accepted = 0, calls = 0;
  const auto run = [&](auto& drafter) {
    specdec::speculative_decoder decoder(cap, drafter);
    for (std::size_t p = 0; p < ps.size(); ++p) {
      auto o = greedy(n_new);
      o.draft_length = 3;
      for (const auto& tree : std::vector<std::vector<std::size_t>>{{}, {3, 2, 2}, {4, 4, 4}}) {
        o.tree = tree;
        const auto r = decoder.generate(ps[p], o);
        INFO("prompt \"" << prompts[p] << "\", tree of depth " << tree.size());
        CHECK(r.tokens == want[p]);
        if (tree.empty()) {
          accepted += r.stats.accepted_tokens;
          calls += r.stats.target_calls;
        }
      }
    }
  };
  if (kind == l2::heads_kind::medusa) {
    specdec::medusa_drafter drafter(cap, rec.medusa, weights()->classifier(), {.max_nodes = 10});
    run(drafter);
  } else {
    specdec::eagle_drafter drafter(cap, rec.eagle, weights()->classifier(),
                                   weights()->token_embedding(), {.max_nodes = 10, .expand = 3});
    run(drafter);
  }
  return static_cast<double>(accepted) / static_cast<double>(calls);
}

}  // namespace

TEST_CASE("stories260K decoder: greedy decoding with heads trained on stories equals plain") {
  const std::vector<std::tuple<const char*, l2::heads_kind, bool>> kinds{
      {"Medusa", l2::heads_kind::medusa, false},
      {"EAGLE-style", l2::heads_kind::eagle, false},
      {"EAGLE-style with attention", l2::heads_kind::eagle, true}};
  for (const auto& [name, kind, attention] : kinds) {
    DYNAMIC_SECTION(name) {
      const double per_call = check_heads(kind, attention);
      std::cout << "stories260K: " << name << " heads, chain of 3: " << per_call
                << " accepted drafts per target call\n";
      CHECK(per_call > 0.3);  // a sanity bound, well below what these short runs reach
    }
  }
}
