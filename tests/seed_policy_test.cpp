// The default seed policy (sampling_params::seed): a fixed seed reseeded at every start.
#include <catch2/catch.hpp>
#include <specdec/batch_decoder.hpp>
#include <specdec/decoder.hpp>
#include <specdec/draft/model_drafter.hpp>
#include <specdec/draft/no_drafter.hpp>

#include <vector>

#include "support/batch_table_model.hpp"
#include "support/table_model.hpp"

using specdec::token_id;

TEST_CASE("seed policy: the default seed repeats a generation, whatever ran before") {
  CHECK(specdec::sampling_params{}.seed == 0);
  specdec::test::table_model target({.vocab_size = 8, .seed = 3});
  specdec::test::table_model draft_model({.vocab_size = 8, .seed = 3, .mix = 0.4f});
  specdec::model_drafter drafter(draft_model);
  specdec::speculative_decoder decoder(target, drafter);
  const std::vector<token_id> prompt{1, 2, 3};
  specdec::generate_options o;  // T = 1, seed 0
  o.max_new_tokens = 30;
  const auto first = decoder.generate(prompt, o);
  specdec::generate_options other = o;
  other.sampling.seed = 99;
  const auto different = decoder.generate(prompt, other);
  const auto again = decoder.generate(prompt, o);
  CHECK(again.tokens == first.tokens);
  CHECK(different.tokens != first.tokens);
}

TEST_CASE("seed policy: a batch sequence's tokens do not depend on the others") {
  const specdec::test::table_model_options table{.vocab_size = 8, .seed = 3};
  const std::vector<token_id> prompt{1, 2, 3};
  specdec::generate_options o;
  o.max_new_tokens = 20;
  o.draft_length = 0;
  specdec::test::batch_table_model alone_model({.model = table});
  specdec::batch_decoder<specdec::test::batch_table_model, specdec::no_drafter> alone(alone_model);
  specdec::no_drafter d0, d1, d2;
  const auto a = alone.add(prompt, o, d0);
  alone.run();
  specdec::test::batch_table_model crowd_model({.model = table});
  specdec::batch_decoder<specdec::test::batch_table_model, specdec::no_drafter> crowd(crowd_model);
  specdec::generate_options busy = o;
  busy.sampling.seed = 5;
  crowd.add(std::vector<token_id>{4, 4}, busy, d1);
  crowd.step();
  const auto b = crowd.add(prompt, o, d2);  // joins late, beside another sequence
  crowd.run();
  CHECK(crowd.result(b).tokens == alone.result(a).tokens);
}
