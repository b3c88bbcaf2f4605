// Must NOT compile, and say so in one error that names the member: a batch engine without
// truncate(id, n) in a batch_decoder whose sequences draft with draft models of their own (the
// setup serving.md shows). check_output.sh counts the compiler's lines.
#include <cstddef>
#include <span>
#include <vector>

#include <specdec/specdec.hpp>

struct my_batch_engine {
  std::size_t vocab_size() const { return 4; }
  specdec::sequence_id create_sequence() { return next++; }
  void release_sequence(specdec::sequence_id) {}
  std::size_t size(specdec::sequence_id) const { return 0; }
  void score(std::span<const specdec::batch_entry>) {}
  specdec::sequence_id next = 0;
};

struct my_model {
  std::size_t vocab_size() const { return 4; }
  std::size_t size() const { return n; }
  void append(std::span<const specdec::token_id> tokens, std::span<float> logits) {
    n += tokens.size();
    for (float& x : logits) x = 0.0f;
  }
  void truncate(std::size_t to) { n = to; }
  std::size_t n = 0;
};

int main() {
  my_batch_engine engine;
  my_model small;
  specdec::model_drafter<my_model> drafter(small);
  specdec::batch_decoder<my_batch_engine, specdec::model_drafter<my_model>> decoder(engine);
  const std::vector<specdec::token_id> prompt{1, 2};
  decoder.add(prompt, specdec::generate_options{}, drafter);
  decoder.run();
}
