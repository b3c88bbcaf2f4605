// Catch2's implementation, compiled once per build folder and linked into every test program
// (it costs a test source about 20 s at -O3). The single-header Catch2 declares Catch::Session
// only beside its implementation, so the programs' main() functions call run_catch instead.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "catch_runner.hpp"

int specdec_test::run_catch(int argc, char* argv[]) { return Catch::Session().run(argc, argv); }
