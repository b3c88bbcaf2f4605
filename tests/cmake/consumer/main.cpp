// Builds against specdec as a dependency and decodes with a two-token toy model.
#include <specdec/specdec.hpp>

struct coin_model {
  std::size_t n = 0;
  std::size_t vocab_size() const { return 2; }
  std::size_t size() const { return n; }
  void append(std::span<const specdec::token_id> t, std::span<float> logits) {
    n += t.size();
    for (auto& x : logits) x = 0.0f;
  }
  void truncate(std::size_t m) { n = m; }
};

int main() {
  coin_model target, draft_model;
  specdec::model_drafter drafter(draft_model);
  specdec::speculative_decoder decoder(target, drafter);
  const std::vector<specdec::token_id> prompt{0};
  specdec::generate_options o;
  o.max_new_tokens = 10;
  return decoder.generate(prompt, o).tokens.size() == 10 ? 0 : 1;
}
