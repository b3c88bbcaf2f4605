// Must not compile: draft heads need a target that hands out hidden states, and a table model
// (a LanguageModel without hidden_size() and append(tokens, logits, hidden)) does not.
#include <specdec/draft/hidden_capture.hpp>

#include "support/table_model.hpp"

int main() {
  specdec::test::table_model target;
  specdec::hidden_capture<specdec::test::table_model> capture(target);
  return static_cast<int>(capture.size());
}
