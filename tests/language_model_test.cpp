#include <catch2/catch.hpp>
#include <specdec/concepts/language_model.hpp>
TEST_CASE("placeholder") { REQUIRE(true); }
