// Must NOT compile: a model whose size() is not const. The message must name that member
// (checked by CTest), not only say that the type is not a LanguageModel.
#include <cstddef>
#include <span>

#include <specdec/decoder.hpp>

struct missing_const {
  std::size_t vocab_size() const { return 4; }
  std::size_t size() { return n; }  // should be const
  void append(std::span<const specdec::token_id> tokens, std::span<float> logits) {
    n += tokens.size();
    for (float& x : logits) x = 0.0f;
  }
  void truncate(std::size_t to) { n = to; }
  std::size_t n = 0;
};

int main() {
  missing_const m;
  specdec::no_drafter d;
  specdec::speculative_decoder<missing_const> decoder(m, d);
}
