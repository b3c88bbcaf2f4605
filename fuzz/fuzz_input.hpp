// fuzz/fuzz_input.hpp - what the fuzz targets share: reading typed values from libFuzzer's bytes,
// a per-process scratch file for the loaders (which take paths), and a check that aborts with a
// message (a failed property is a crash libFuzzer records, with its reproducer).
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

namespace specdec::fuzz {

/// Reads little-endian values from the input; past its end every read yields 0.
class input {
 public:
  input(const std::uint8_t* data, std::size_t size) : p_(data), left_(size) {}
  std::size_t left() const noexcept { return left_; }
  std::uint8_t byte() {
    if (left_ == 0) return 0;
    --left_;
    return *p_++;
  }
  std::uint32_t u32() {
    std::uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= static_cast<std::uint32_t>(byte()) << (8 * i);
    return v;
  }
  /// A value in [0, n) (n > 0) from one byte when n <= 256, else from four.
  std::size_t below(std::size_t n) { return n <= 256 ? byte() % n : u32() % n; }
  /// The rest of the input.
  std::string_view rest() {
    const std::string_view s(reinterpret_cast<const char*>(p_), left_);
    p_ += left_;
    left_ = 0;
    return s;
  }

 private:
  const std::uint8_t* p_;
  std::size_t left_;
};

/// A file of this process's own under the temporary folder, rewritten per input.
inline const std::filesystem::path& scratch_file(const char* name) {
  static const std::filesystem::path p =
      std::filesystem::temp_directory_path() /
      (std::string("specdec_fuzz_") + name + "_" + std::to_string(::getpid()) + ".bin");
  return p;
}

inline void write_file(const std::filesystem::path& p, std::string_view bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

/// A property failed: print it and abort, so libFuzzer saves the input.
[[noreturn]] inline void fail(const std::string& what) {
  std::fprintf(stderr, "property violated: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

#define SPECDEC_FUZZ_CHECK(cond, what)                                      \
  do {                                                                      \
    if (!(cond)) ::specdec::fuzz::fail(std::string(#cond) + ": " + (what)); \
  } while (false)

}  // namespace specdec::fuzz
