// The Catch2 main shared by the unit-test programs.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
