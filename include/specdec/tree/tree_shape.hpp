// specdec/tree/tree_shape.hpp - tree shapes given as branching factors (k1 x k2 x ...): the
// node limit, node counts that never overflow, the check of a shape given from outside, and the
// parser of "4x2x2".
#pragma once

#include <cstddef>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace specdec {

/// The largest number of nodes a token_tree may hold (node indices are std::int32_t).
inline constexpr std::size_t max_tree_nodes = std::size_t{1} << 20;

namespace detail {
/// "the first", "the second", ... "the 12th" (error messages).
inline std::string ordinal(std::size_t k) {
  static const char* const words[] = {"first", "second",  "third",  "fourth", "fifth",
                                      "sixth", "seventh", "eighth", "ninth",  "tenth"};
  if (k >= 1 && k <= 10) return std::string("the ") + words[k - 1];
  const std::size_t last2 = k % 100, last = k % 10;
  const char* suffix = (last2 >= 11 && last2 <= 13) ? "th"
                       : last == 1                  ? "st"
                       : last == 2                  ? "nd"
                       : last == 3                  ? "rd"
                                                    : "th";
  return "the " + std::to_string(k) + suffix;
}

/// "4x2x2" (error messages).
inline std::string shape_name(std::span<const std::size_t> branching) {
  std::string s;
  for (const std::size_t k : branching) {
    if (!s.empty()) s += 'x';
    s += std::to_string(k);
  }
  return s.empty() ? "(empty)" : s;
}
}  // namespace detail

/**
 * The nodes of the full shape `branching` besides the root (k1 + k1 k2 + k1 k2 k3 + ...; a
 * factor of 0 ends it), saturated at `cap`: exact while below `cap`, `cap` otherwise, without
 * overflow whatever the factors. O(depth). Thread-safe.
 */
inline std::size_t shape_nodes(std::span<const std::size_t> branching,
                               std::size_t cap = std::numeric_limits<std::size_t>::max()) noexcept {
  std::size_t total = 0, width = 1;
  for (const std::size_t k : branching) {
    if (k == 0) break;
    width = width > cap / k ? cap : width * k;
    if (width >= cap - total) return cap;
    total += width;
  }
  return total;
}

/**
 * Throws std::invalid_argument, naming the shape after `who`, unless every factor of
 * `branching` is >= 1 and its full shape, root included, has at most max_tree_nodes nodes: the
 * check for a shape given from outside (generate_options::tree). O(depth).
 */
inline void check_tree_shape(std::span<const std::size_t> branching, const std::string& who) {
  for (std::size_t i = 0; i < branching.size(); ++i)
    if (branching[i] == 0)
      throw std::invalid_argument(who + "[" + std::to_string(i) +
                                  "]: a branching factor must be >= 1");
  if (shape_nodes(branching, max_tree_nodes) >= max_tree_nodes)
    throw std::invalid_argument(who + ": the shape " + detail::shape_name(branching) +
                                " has more nodes than max_tree_nodes = " +
                                std::to_string(max_tree_nodes));
}

/**
 * Parses a branching config such as "4x2x2" (4 children of the root, 2 children of each of
 * those, 2 of each of those) into its factors {4, 2, 2}. Factors are decimal integers >= 1
 * separated by a lower-case 'x'. Throws std::invalid_argument naming the config and the fault
 * (empty config, empty factor, a character that is not a digit, a factor of 0, a total above
 * max_tree_nodes). O(length).
 */
inline std::vector<std::size_t> parse_branching(std::string_view config) {
  const auto fail = [&](const std::string& why) {
    throw std::invalid_argument("parse_branching: \"" + std::string(config) + "\": " + why);
  };
  if (config.empty()) fail("empty config (expected factors like 4x2x2)");
  std::vector<std::size_t> factors;
  std::size_t value = 0;
  bool have_digit = false;
  for (std::size_t i = 0; i <= config.size(); ++i) {
    if (i == config.size() || config[i] == 'x') {
      if (!have_digit) fail("empty factor at position " + std::to_string(i));
      if (value == 0)
        fail(detail::ordinal(factors.size() + 1) + " factor is 0; every factor must be >= 1");
      factors.push_back(value);
      value = 0;
      have_digit = false;
      continue;
    }
    const char c = config[i];
    if (c < '0' || c > '9') {
      std::string why = "'";  // built piecewise: GCC 12 warns (-Wrestrict) on the + chain
      why += c;
      why += "' at position ";
      why += std::to_string(i);
      why += " is not a digit or 'x'";
      fail(why);
    }
    value = value * 10 + static_cast<std::size_t>(c - '0');
    have_digit = true;
    if (value > max_tree_nodes) fail("the tree would exceed max_tree_nodes");
  }
  std::size_t width = 1, total = 1;
  for (std::size_t f : factors) {
    width *= f;  // both stay <= max_tree_nodes * max_tree_nodes: no overflow
    total += width;
    if (total > max_tree_nodes) fail("the tree would exceed max_tree_nodes");
  }
  return factors;
}

}  // namespace specdec
