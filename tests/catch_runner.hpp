// tests/catch_runner.hpp - Catch2's session for a test program's own main(): its implementation
// is compiled once, in catch_runner.cpp, which every test program links (specdec_catch_runner).
#pragma once

namespace specdec_test {

/// Runs the program's Catch2 test cases with the command line's arguments; returns Catch's code.
int run_catch(int argc, char* argv[]);

}  // namespace specdec_test
