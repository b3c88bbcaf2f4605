// Must NOT compile: a conformance-kit factory that returns a reference to one model instead of a
// new model by value. The build output must show specdec's static_assert message (checked by
// CTest).
#include <specdec/testing.hpp>

#include "support/table_model.hpp"

int main() {
  specdec::test::table_model m;
  const auto rep = specdec::testing::run_all([&]() -> specdec::test::table_model& { return m; });
  return rep.ok ? 0 : 1;
}
