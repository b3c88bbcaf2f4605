// Must NOT compile, and say so in one error that names the member: README's setup (the adapter
// as target and as draft model, class template argument deduction) with an adapter that has no
// truncate(). check_output.sh counts the compiler's lines.
#include <cstddef>
#include <span>
#include <vector>

#include <specdec/specdec.hpp>

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
  my_model target, draft;
  specdec::model_drafter drafter(draft);
  specdec::speculative_decoder decoder(target, drafter);
  specdec::generate_options options;
  const std::vector<specdec::token_id> prompt{1, 2};
  return static_cast<int>(decoder.generate(prompt, options).tokens.size());
}
