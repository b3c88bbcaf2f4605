// common/cli/parse_number.hpp - reading a command-line value as a number: the whole text must be
// the number (no sign on an unsigned type, no trailing characters, not empty). The one reader
// behind the flag parser, --draft layers:L and specdec-reshape's fields; callers word the error.
#pragma once

#include <charconv>
#include <string_view>

namespace specdec::cli {

/// What reading a number found.
enum class number_read { ok, not_a_number, out_of_range };

/// Reads all of `text` into `out` (an integer or floating-point type, std::from_chars' rules).
/// `out` is written only when the result is ok.
template <class T>
number_read parse_number(std::string_view text, T& out) {
  T v{};
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (ec == std::errc::result_out_of_range) return number_read::out_of_range;
  if (ec != std::errc() || ptr != end || text.empty()) return number_read::not_a_number;
  out = v;
  return number_read::ok;
}

}  // namespace specdec::cli
