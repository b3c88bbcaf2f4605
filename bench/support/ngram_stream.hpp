// bench/support/ngram_stream.hpp - the token stream of ngram_bench and ngram_misses_bench:
// vocabulary 32000, skewed fresh tokens, and copies of earlier spans (8..64 tokens, half from the
// last 4096 tokens, half from anywhere), so that about half the tokens repeat text.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

#include "specdec/types.hpp"

namespace specdec::bench {

struct splitmix {
  std::uint64_t s;
  std::uint64_t next() {
    std::uint64_t z = (s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  std::size_t below(std::size_t n) { return static_cast<std::size_t>(next() % n); }
};

/// The first n tokens of the stream seeded with n (memoised).
inline const std::vector<token_id>& stream(std::size_t n) {
  static std::map<std::size_t, std::vector<token_id>> cache;
  auto& s = cache[n];
  if (!s.empty()) return s;
  splitmix g{n};
  s.reserve(n);
  while (s.size() < n) {
    if (s.size() > 64 && g.uniform() < 0.04) {
      const std::size_t len = 8 + g.below(57);
      const std::size_t window = std::min<std::size_t>(s.size(), g.below(2) ? 4096 : s.size());
      std::size_t from = s.size() - 1 - g.below(window);
      for (std::size_t i = 0; i < len && s.size() < n; ++i) s.push_back(s[from++]);
    } else {
      const double u = g.uniform();
      s.push_back(static_cast<token_id>(32000.0 * u * u * u));  // skewed towards small ids
    }
  }
  return s;
}

}  // namespace specdec::bench
