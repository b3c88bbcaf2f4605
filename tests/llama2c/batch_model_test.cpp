// Real-model tests of the batched engine (llama2c/batch_model.hpp) and the batch decoder on it:
// the batch conformance checks (rows bit-identical to scoring alone), the reference text, and
// every sequence of a batch decoding exactly as it does alone, greedy and sampled.
#include "common.hpp"  // Catch's runner, main(), the model paths and run.c's reference

#include <algorithm>
#include <cstddef>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include <llama2c/batch_model.hpp>
#include <llama2c/model.hpp>
#include <llama2c/tokenizer.hpp>
#include <specdec/specdec.hpp>
#include <specdec/testing.hpp>

namespace l2 = specdec::llama2c;
using specdec::sequence_id;
using specdec::token_id;
using llama2c_test::checkpoint_path;
using llama2c_test::tokenizer_path;

namespace {

using draft_t = specdec::model_drafter<l2::layer_skip_draft>;
using view_t = specdec::sequence_view<l2::batch_model>;

struct fixture {
  std::shared_ptr<const l2::weights> w = l2::load_checkpoint(checkpoint_path);
  l2::tokenizer tok{tokenizer_path, w->cfg().vocab_size};
};

// Layer-skip drafts (the first 2 layers), one per sequence, at stable addresses.
struct drafts {
  std::shared_ptr<const l2::weights> w;
  std::deque<l2::layer_skip_draft> models;
  std::deque<draft_t> list;
  draft_t& make() {
    models.emplace_back(w, 2, l2::model_options{.threads = 1});
    return list.emplace_back(models.back());
  }
};

std::vector<specdec::generate_options> varied_options() {
  std::vector<specdec::generate_options> o(4);
  o[0].sampling.temperature = 0.0f;
  o[0].draft_length = 4;
  o[1].sampling = {.temperature = 0.8f, .seed = 3};
  o[1].draft_length = 3;
  o[2].sampling = {.temperature = 1.0f, .top_p = 0.9f, .seed = 4};
  o[2].draft_length = 5;
  o[3].sampling.temperature = 0.0f;
  o[3].draft_length = 1;
  for (auto& x : o) x.max_new_tokens = 60;
  return o;
}

}  // namespace

TEST_CASE("llama2c batch_model: passes the batch conformance checks, rows bit-identical") {
  fixture f;
  l2::batch_model m(f.w, {.max_sequences = 16, .max_batch_tokens = 64});
  const auto rep = specdec::testing::run_batch_checks(m);
  INFO(rep.message);
  CHECK(rep.ok);
  CHECK(rep.checks.size() == 4);
}

TEST_CASE("llama2c batch_model: a batch of one decodes run.c's reference text") {
  fixture f;
  l2::batch_model m(f.w);
  specdec::batch_decoder<l2::batch_model> batch(m);
  specdec::no_drafter none;
  const auto prompt = f.tok.encode(std::string(specdec::llama2c::reference_prompt));
  const std::size_t fed = prompt.size() - 1;  // run.c's reference starts after BOS
  specdec::generate_options o;
  o.sampling.temperature = 0.0f;
  o.max_new_tokens = llama2c_test::reference_ids.size() - fed;
  const auto id = batch.add(prompt, o, none);
  batch.run();
  const auto got = batch.result(id).tokens;
  REQUIRE(got.size() == o.max_new_tokens);
  CHECK(std::equal(got.begin(), got.end(),
                   llama2c_test::reference_ids.begin() + static_cast<std::ptrdiff_t>(fed)));
}

TEST_CASE("llama2c batch_decoder: each sequence decodes exactly as it does alone") {
  fixture f;
  const auto options = varied_options();
  const std::vector<std::string> texts = {"I dreamed", "The light", "Once upon a time", "A cat"};
  l2::batch_model m(f.w, {.max_sequences = 8, .max_batch_tokens = 64});
  drafts d{f.w, {}, {}};
  specdec::batch_decoder<l2::batch_model, draft_t> batch(m);
  std::vector<sequence_id> ids;
  for (std::size_t i = 0; i < texts.size(); ++i)
    ids.push_back(batch.add(f.tok.encode(texts[i]), options[i], d.make()));
  batch.run();
  CHECK(batch.stats().target_calls == batch.stats().steps);
  for (std::size_t i = 0; i < texts.size(); ++i) {
    INFO("sequence " << i << ": " << texts[i]);
    l2::batch_model alone_model(f.w, {.max_sequences = 1});
    view_t view(alone_model, alone_model.create_sequence());
    drafts da{f.w, {}, {}};
    specdec::speculative_decoder alone(view, da.make());
    CHECK(batch.result(ids[i]).tokens == alone.generate(f.tok.encode(texts[i]), options[i]).tokens);
  }
  // Greedy sequences also equal plain greedy decoding on the single-sequence engine.
  l2::model single(f.w);
  specdec::generate_options g = options[0];
  CHECK(batch.result(ids[0]).tokens ==
        specdec::generate_autoregressive(single, f.tok.encode(texts[0]), g).tokens);
}

TEST_CASE("llama2c batch_model: bad input is refused naming the entry, nothing changes") {
  fixture f;
  l2::batch_model m(f.w, {.max_sequences = 2, .max_batch_tokens = 8});
  const auto a = m.create_sequence();
  m.create_sequence();
  REQUIRE_THROWS_WITH(m.create_sequence(),
                      "llama2c::batch_model::create_sequence: 2 sequences are live, "
                      "max_sequences = 2");
  std::vector<float> logits(2 * m.vocab_size());
  const std::vector<token_id> bad{1, 512};
  const specdec::batch_entry e{a, bad, {}, logits};
  REQUIRE_THROWS_WITH(m.score(std::span<const specdec::batch_entry>(&e, 1)),
                      "llama2c::batch_model::score: entry 0 (sequence " + std::to_string(a) +
                          "): token 512 at index 1 outside the vocabulary [0, 512)");
  CHECK(m.size(a) == 0);
  m.release_sequence(a);
  REQUIRE_THROWS_WITH(m.size(a), "llama2c::batch_model::size: sequence " + std::to_string(a) +
                                     " is unknown (never created, or released)");
}
