// Must NOT compile: a model whose size() is not const. The message must name that member
// (checked by CTest), not only say that the type is not a LanguageModel.
#include <specdec/decoder.hpp>

#include "compile_errors/adapters.hpp"

int main() {
  adapters::size_not_const m;
  specdec::no_drafter d;
  specdec::speculative_decoder<adapters::size_not_const> decoder(m, d);
}
