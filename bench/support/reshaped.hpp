// bench/support/reshaped.hpp - the memory-bound targets and separate drafts of the benchmarks,
// written at bench time from the real aidreams260K checkpoint (never committed):
//
//   reshaped("110M")   aidreams260K reshaped to the 110M shape (llama2c/tools/reshape.hpp): the same
//                      function as aidreams260K at the forward cost of a 110M-shape model.
//   first_layers(L)    the first L layers of aidreams260K with its final norm and classifier
//                      (specdec-reshape --keep-layers L): a separate, cheap draft model.
//
// Files go to SPECDEC_BENCH_DATA_DIR (bench/CMakeLists.txt: the build folder's bench-data/) and
// are reused by later runs; delete the folder to rebuild them.
#pragma once

#include <cstdio>
#include <filesystem>
#include <string>

#include "bench/support/models.hpp"
#include "llama2c/tools/reshape.hpp"

#ifndef SPECDEC_BENCH_DATA_DIR
#error "SPECDEC_BENCH_DATA_DIR is not defined: bench/CMakeLists.txt defines it"
#endif

namespace specdec::bench {

inline const std::filesystem::path bench_data_dir{SPECDEC_BENCH_DATA_DIR};

/// aidreams260K reshaped to the named shape (15M, 42M, 110M); written on first use.
inline std::filesystem::path reshaped(const std::string& shape) {
  const auto path = bench_data_dir / ("aidreams260K-" + shape + ".bin");
  if (!std::filesystem::exists(path)) {
    std::filesystem::create_directories(bench_data_dir);
    const auto r = llama2c::reshape_checkpoint(checkpoint_path, path, llama2c::shape_named(shape));
    std::fprintf(stderr, "wrote %s (%.1f MB, %.2f s)\n", path.string().c_str(),
                 static_cast<double>(r.bytes) / 1e6, r.seconds);
  }
  return path;
}

/// The first `layers` layers of aidreams260K as a checkpoint of its own; written on first use.
inline std::filesystem::path first_layers(std::size_t layers) {
  const auto path = bench_data_dir / ("aidreams260K-first" + std::to_string(layers) + ".bin");
  if (!std::filesystem::exists(path)) {
    std::filesystem::create_directories(bench_data_dir);
    llama2c::keep_layers(checkpoint_path, path, layers);
  }
  return path;
}

}  // namespace specdec::bench
