// Must NOT compile: a single-sequence model (no create_sequence/score) used as a batch model. The
// build output must show specdec's static_assert message (checked by CTest).
#include <specdec/batch_decoder.hpp>

#include <span>

struct single_sequence_model {
  std::size_t vocab_size() const { return 4; }
  std::size_t size() const { return 0; }
  void append(std::span<const specdec::token_id>, std::span<float>) {}
  void truncate(std::size_t) {}
};

int main() {
  single_sequence_model m;
  specdec::batch_decoder<single_sequence_model> decoder(m);
}
