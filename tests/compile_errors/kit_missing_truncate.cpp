// Must NOT compile, and say so in one error that names the member: the conformance kit run on an
// adapter without truncate(). check_output.sh counts the compiler's lines.
#include <specdec/testing.hpp>

#include "adapters.hpp"

int main() {
  adapters::no_truncate m;
  return specdec::testing::run_all(m).ok ? 0 : 1;
}
