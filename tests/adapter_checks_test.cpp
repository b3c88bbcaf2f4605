// The adapter faults the decoder catches at run time (decode/adapter_checks.hpp): a truncate()
// that keeps tokens and an append() that adds none give std::logic_error naming the member and
// what it reported, not silent wrong output; driving the public phases with the scoring call
// forgotten throws before anything is emitted; a correct adapter never trips them (its greedy
// output equals plain greedy).
#include <catch2/catch.hpp>
#include <cstddef>
#include <span>
#include <specdec/decoder.hpp>
#include <specdec/decode/commit_phase.hpp>
#include <specdec/decode/draft_phase.hpp>
#include <specdec/decode/score_phase.hpp>
#include <specdec/decode/start.hpp>
#include <specdec/decode/verify_phase.hpp>
#include <specdec/draft/model_drafter.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "support/table_model.hpp"

namespace {

using specdec::token_id;
using specdec::test::table_model;

enum class fault { none, truncate_noop, append_noop };

// The four members of an engine author's adapter, with one fault switched on at will.
class faulty_model {
 public:
  explicit faulty_model(table_model& inner) : inner_(inner) {}
  std::size_t vocab_size() const { return inner_.vocab_size(); }
  std::size_t size() const { return inner_.size(); }
  void append(std::span<const token_id> tokens, std::span<float> logits) {
    if (broken == fault::append_noop) return;  // writes no row, adds nothing to the cache
    inner_.append(tokens, logits);
  }
  void truncate(std::size_t n) {
    if (broken == fault::truncate_noop) return;
    inner_.truncate(n);
  }
  fault broken = fault::none;

 private:
  table_model& inner_;
};

const std::vector<token_id> prompt{3, 1, 4, 1, 5};

specdec::generate_options greedy(std::size_t n) {
  specdec::generate_options o;
  o.max_new_tokens = n;
  o.sampling.temperature = 0.0f;
  o.draft_length = 4;
  return o;
}

}  // namespace

TEST_CASE("adapter checks: a correct four-member adapter decodes as plain greedy") {
  table_model inner({.vocab_size = 16, .order = 3, .seed = 7});
  faulty_model target(inner);
  table_model draft_inner({.vocab_size = 16, .order = 3, .seed = 7, .mix = 0.3f, .mix_seed = 2});
  specdec::model_drafter<table_model> drafter(draft_inner);
  specdec::speculative_decoder decoder(target, drafter);
  const auto spec = decoder.generate(prompt, greedy(64));
  table_model plain_inner({.vocab_size = 16, .order = 3, .seed = 7});
  const auto plain = specdec::generate_autoregressive(plain_inner, prompt, greedy(64));
  CHECK(spec.tokens == plain.tokens);
  CHECK(spec.stats.accepted_tokens > 0);
  CHECK(spec.stats.accepted_tokens < spec.stats.drafted_tokens);  // rejections happened too
}

TEST_CASE("adapter checks: a truncate() that keeps tokens throws std::logic_error naming it") {
  table_model inner({.vocab_size = 16, .order = 3, .seed = 7});
  faulty_model target(inner);
  table_model draft_inner({.vocab_size = 16, .order = 3, .seed = 7, .mix = 0.3f, .mix_seed = 2});
  specdec::model_drafter<table_model> drafter(draft_inner);
  specdec::speculative_decoder decoder(target, drafter);
  target.broken = fault::truncate_noop;
  try {
    decoder.generate(prompt, greedy(64));
    FAIL("a no-op truncate() went unnoticed");
  } catch (const std::logic_error& e) {
    const std::string what = e.what();
    INFO(what);
    CHECK(what.find("truncate(") != std::string::npos);
    CHECK(what.find("size()") != std::string::npos);
    CHECK(what.find("target") != std::string::npos);
  }
  CHECK(decoder.done());
}

TEST_CASE("adapter checks: an append() that adds nothing throws std::logic_error naming it") {
  table_model inner({.vocab_size = 16, .order = 3, .seed = 7});
  faulty_model target(inner);
  table_model draft_inner({.vocab_size = 16, .order = 3, .seed = 7});
  specdec::model_drafter<table_model> drafter(draft_inner);
  specdec::speculative_decoder decoder(target, drafter);
  decoder.start(prompt, greedy(32));
  target.broken = fault::append_noop;
  try {
    decoder.step();
    FAIL("a no-op append() went unnoticed");
  } catch (const std::logic_error& e) {
    const std::string what = e.what();
    INFO(what);
    CHECK(what.find("append of") != std::string::npos);
  }
  // The step was abandoned: with the adapter mended, decoding goes on from where it stood.
  target.broken = fault::none;
  while (!decoder.done()) decoder.step();
  table_model plain_inner({.vocab_size = 16, .order = 3, .seed = 7});
  const auto plain = specdec::generate_autoregressive(plain_inner, prompt, greedy(32));
  CHECK(std::vector<token_id>(decoder.history().begin() + 5, decoder.history().end()) == plain.tokens);
}

TEST_CASE("adapter checks: the public phases with the scoring call forgotten throw before emitting") {
  table_model target({.vocab_size = 16, .order = 3, .seed = 7});
  table_model draft_inner({.vocab_size = 16, .order = 3, .seed = 7});
  specdec::model_drafter<table_model> drafter(draft_inner);
  specdec::sequence_state s;
  specdec::start_sequence(s, target, drafter, prompt, greedy(32));
  specdec::draft_phase(s, drafter);
  REQUIRE(s.positions > 0);
  // score_phase(s, target) forgotten
  specdec::verify_phase(s);
  const std::size_t history = s.history.size();
  try {
    specdec::commit_phase(s, target, drafter);
    FAIL("a step verified without being scored was committed");
  } catch (const std::logic_error& e) {
    const std::string what = e.what();
    INFO(what);
    CHECK(what.find("without being scored") != std::string::npos);
  }
  CHECK(s.history.size() == history);  // nothing emitted
  CHECK(target.size() == history - 1);  // the model as before the step
  // The sequence goes on with the phases in order.
  while (!s.done) {
    specdec::draft_phase(s, drafter);
    specdec::score_phase(s, target);
    specdec::verify_phase(s);
    specdec::commit_phase(s, target, drafter);
  }
  table_model plain_inner({.vocab_size = 16, .order = 3, .seed = 7});
  const auto plain = specdec::generate_autoregressive(plain_inner, prompt, greedy(32));
  CHECK(std::vector<token_id>(s.history.begin() + 5, s.history.end()) == plain.tokens);
}
