// Must NOT compile: a type without append/truncate used as a target. The build output must show
// specdec's static_assert message (checked by CTest), not only a wall of template notes.
#include <specdec/decoder.hpp>

struct not_a_model {
  std::size_t vocab_size() const { return 4; }
};

int main() {
  not_a_model m;
  specdec::no_drafter d;
  specdec::speculative_decoder<not_a_model> decoder(m, d);
}
