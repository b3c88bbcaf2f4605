// Real-model tests of the decoder: speculative decoding on a llama2.c checkpoint returns exactly
// the plain greedy tokens (chain, trees, prompt lookup), and sampled runs are reproducible.
#include "common.hpp"  // Catch's runner, main(), the model paths and run.c's reference

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include <llama2c/engine/model.hpp>
#include <llama2c/engine/tokenizer.hpp>
#include <specdec/specdec.hpp>

namespace l2 = specdec::llama2c;
using specdec::token_id;
using llama2c_test::checkpoint_path;
using llama2c_test::tokenizer_path;

namespace {

struct fixture {
  std::shared_ptr<const l2::weights> w = l2::load_checkpoint(checkpoint_path);
  l2::tokenizer tok{tokenizer_path, w->cfg().vocab_size};
  l2::model target{w};
};

// A speculative decoder on `target` with the layer-skip draft of its first `layers` layers.
struct layer_skip_decoder {
  layer_skip_decoder(l2::model& target, std::size_t layers)
      : draft_model(target, layers), drafter(draft_model), decoder(target, drafter) {}
  l2::layer_skip_draft draft_model;
  specdec::model_drafter<l2::layer_skip_draft> drafter;
  specdec::speculative_decoder<l2::model, specdec::model_drafter<l2::layer_skip_draft>> decoder;
};

// The plain greedy loop the decoder is compared with: the target as the decoder evaluates it
// (one token per append, like generate_autoregressive).
std::vector<token_id> plain_greedy(l2::model& m, const std::vector<token_id>& prompt, std::size_t n) {
  specdec::generate_options o;
  o.max_new_tokens = n;
  o.sampling.temperature = 0.0f;
  return specdec::generate_autoregressive(m, prompt, o).tokens;
}

}  // namespace

TEST_CASE("llama2c decoder: greedy speculative decoding equals plain greedy decoding") {
  fixture f;
  const std::vector<std::string> prompts = {"I dreamed", "The light", "Once upon a time"};
  for (const auto& text : prompts) {
    const auto prompt = f.tok.encode(text);
    const auto plain = plain_greedy(f.target, prompt, 80);
    INFO("prompt: " << text);
    for (std::size_t layers : {1u, 2u, 3u}) {
      layer_skip_decoder s(f.target, layers);
      auto& decoder = s.decoder;
      specdec::generate_options o;
      o.max_new_tokens = 80;
      o.sampling.temperature = 0.0f;
      for (std::size_t k : {1u, 2u, 4u, 8u}) {
        o.draft_length = k;
        const auto r = decoder.generate(prompt, o);
        INFO("layer-skip L = " << layers << ", K = " << k);
        CHECK(r.tokens == plain);
      }
      for (const char* shape : {"2x2", "4x2x2", "8x1"}) {
        o.tree = specdec::parse_branching(shape);
        const auto r = decoder.generate(prompt, o);
        INFO("layer-skip L = " << layers << ", tree " << shape);
        CHECK(r.tokens == plain);
      }
    }
    specdec::ngram_drafter lookup({.min_ngram = 1, .max_ngram = 4});
    specdec::speculative_decoder decoder(f.target, lookup);
    specdec::generate_options o;
    o.max_new_tokens = 80;
    o.sampling.temperature = 0.0f;
    o.draft_length = 8;
    CHECK(decoder.generate(prompt, o).tokens == plain);
    o.tree = {4, 1, 1, 1, 1, 1};
    CHECK(decoder.generate(prompt, o).tokens == plain);
  }
}

TEST_CASE("llama2c decoder: the README reference continuation comes out of speculative decoding") {
  fixture f;
  const auto prompt = f.tok.encode(l2::reference_prompt);
  layer_skip_decoder s(f.target, 3);
  specdec::generate_options o;
  o.max_new_tokens = 96 - prompt.size() + 1;  // run.c: 96 positions in all, BOS included
  o.sampling.temperature = 0.0f;
  const auto r = s.decoder.generate(prompt, o);
  std::vector<token_id> all(prompt.begin(), prompt.end());
  all.insert(all.end(), r.tokens.begin(), r.tokens.end());
  CHECK(f.tok.decode(all) == llama2c_test::reference_text);
}

TEST_CASE("llama2c decoder: sampled runs are reproducible at a fixed seed") {
  fixture f;
  const auto prompt = f.tok.encode("I dreamed");
  layer_skip_decoder s(f.target, 2);
  auto& decoder = s.decoder;
  specdec::generate_options o;
  o.max_new_tokens = 60;
  o.sampling = {.temperature = 1.0f, .top_p = 0.95f, .seed = 77};
  const auto a = decoder.generate(prompt, o);
  const auto b = decoder.generate(prompt, o);
  CHECK(a.tokens == b.tokens);
  o.tree = {3, 2};
  o.tree_draw = specdec::candidate_draw::without_replacement;
  const auto c = decoder.generate(prompt, o);
  const auto d = decoder.generate(prompt, o);
  CHECK(c.tokens == d.tokens);
  o.sampling.seed = 78;
  CHECK(decoder.generate(prompt, o).tokens != c.tokens);
}

TEST_CASE("llama2c decoder: a prompt longer than the context is refused, the model stays usable") {
  fixture f;
  specdec::no_drafter none;
  specdec::speculative_decoder decoder(f.target, none);
  const std::vector<token_id> too_long(f.target.max_size() + 1, 300);
  REQUIRE_THROWS_WITH(decoder.generate(too_long, {}),
                      "prompt: 129 tokens exceed the target's max_size 128");
  const auto prompt = f.tok.encode("I dreamed");
  specdec::generate_options o;
  o.max_new_tokens = 500;
  o.sampling.temperature = 0.0f;
  const auto r = decoder.generate(prompt, o);
  CHECK(r.reason == specdec::stop_reason::context_full);
  CHECK(prompt.size() + r.tokens.size() == f.target.max_size());
}

TEST_CASE("llama2c decoder: the row processor runs on the rows a verifier reads, one per token") {
  // Prompt lookup drafts carry no rows, so every processor call is the target's. Token-wise
  // verification reads row 0 and the row after each accepted draft: accepted + 1 rows a step,
  // where processing every scored row (as the decoder did before) cost K + 1.
  fixture f;
  const auto prompt = f.tok.encode("I dreamed I was a bird and I dreamed I was a bird and I");
  for (const float temperature : {0.0f, 0.8f}) {
    std::size_t calls = 0;
    const specdec::row_processor penalty = specdec::penalties({.last_n = 64, .repeat = 1.1f});
    specdec::generate_options o;
    o.max_new_tokens = 120;
    o.draft_length = 8;
    o.sampling.temperature = temperature;
    o.sampling.seed = 3;
    o.sampling.processor = [&](std::span<const token_id> prefix, std::span<float> row) {
      ++calls;
      penalty(prefix, row);
    };
    specdec::ngram_drafter lookup({.min_ngram = 1, .max_ngram = 4});
    specdec::speculative_decoder decoder(f.target, lookup);
    const auto r = decoder.generate(prompt, o);
    const auto& st = r.stats;
    const std::size_t rows_scored = st.target_calls + st.drafted_tokens;
    INFO("T = " << temperature << ": " << calls << " processor calls for " << r.tokens.size()
                << " tokens (" << st.target_calls << " calls, " << rows_scored << " rows scored)");
    CHECK(st.accepted_tokens > 0);
    CHECK(calls == st.accepted_tokens + st.target_calls);
    CHECK(calls < rows_scored);
    std::cout << "row processor, n-gram K = 8, T = " << temperature << ": "
              << static_cast<double>(calls) / static_cast<double>(r.tokens.size())
              << " calls per token (every scored row: "
              << static_cast<double>(rows_scored) / static_cast<double>(r.tokens.size())
              << ")\n";
  }
}
