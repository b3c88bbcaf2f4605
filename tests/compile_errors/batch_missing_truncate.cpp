// Must NOT compile, and say so in one error that names the member: a batch engine without
// truncate(id, n) in a batch_decoder whose sequences draft with draft models of their own (the
// setup serving.md shows). check_output.sh counts the compiler's lines.
#include <vector>

#include <specdec/specdec.hpp>

#include "adapters.hpp"

int main() {
  adapters::batch_no_truncate engine;
  adapters::good_model small;
  specdec::model_drafter<adapters::good_model> drafter(small);
  specdec::batch_decoder<adapters::batch_no_truncate, specdec::model_drafter<adapters::good_model>> decoder(engine);
  const std::vector<specdec::token_id> prompt{1, 2};
  decoder.add(prompt, specdec::generate_options{}, drafter);
  decoder.run();
}
