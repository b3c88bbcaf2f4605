// Must NOT compile, and say so in one error that names the member: the conformance kit run on an
// adapter without truncate(). check_output.sh counts the compiler's lines.
#include <cstddef>
#include <span>

#include <specdec/testing.hpp>

struct my_model {
  std::size_t vocab_size() const { return 4; }
  std::size_t size() const { return n; }
  void append(std::span<const specdec::token_id> tokens, std::span<float> logits) {
    n += tokens.size();
    for (float& x : logits) x = 0.0f;
  }
  std::size_t n = 0;
};

int main() {
  my_model m;
  return specdec::testing::run_all(m).ok ? 0 : 1;
}
