// Must NOT compile: a drafter without propose/accept/reset.
#include <specdec/decoder.hpp>

#include "support/table_model.hpp"

struct not_a_drafter {};

int main() {
  specdec::test::table_model m;
  not_a_drafter d;
  specdec::speculative_decoder<specdec::test::table_model, not_a_drafter> decoder(m, d);
}
