// tests/llama2c/run_or_skip.hpp - the real-model test programs' main(): Catch's session, or a
// skip (exit 77, which CTest reports as skipped) naming the first model file that is absent, so a
// fresh clone without ../shared/models passes.
#pragma once

#include <catch2/catch.hpp>

#include "catch_runner.hpp"

#include <filesystem>
#include <initializer_list>
#include <iostream>

namespace llama2c_test {

inline int run_or_skip(int argc, char* argv[],
                       std::initializer_list<std::filesystem::path> needed) {
  for (const auto& p : needed) {
    if (!std::filesystem::exists(p)) {
      std::cout << "skipping: " << p.string()
                << " not found; real-model tests need ../shared/models (set SPECDEC_MODELS_DIR)\n";
      return 77;
    }
  }
  return specdec_test::run_catch(argc, argv);
}

}  // namespace llama2c_test
