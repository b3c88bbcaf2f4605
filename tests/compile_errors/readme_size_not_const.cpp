// Must NOT compile, and say so in one error that names the member: README's setup (the adapter
// as target and as draft model, class template argument deduction) with an adapter whose size() is
// not const. check_output.sh counts the compiler's lines.
#include <vector>

#include <specdec/specdec.hpp>

#include "adapters.hpp"

int main() {
  adapters::size_not_const target, draft;
  specdec::model_drafter drafter(draft);
  specdec::speculative_decoder decoder(target, drafter);
  specdec::generate_options options;
  const std::vector<specdec::token_id> prompt{1, 2};
  return static_cast<int>(decoder.generate(prompt, options).tokens.size());
}
