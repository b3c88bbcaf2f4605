#include <catch2/catch.hpp>
#include <cstddef>
#include <cstdint>
#include <specdec/detail/path_paint_forest.hpp>
#include <vector>

#include "support/lcg.hpp"

using forest = specdec::detail::path_paint_forest<>;
using specdec::detail::path_values;
using specdec::test::lcg;

namespace {

constexpr std::uint32_t nil = forest::nil;

// The forest as parent pointers, painted by walking the path.
struct brute_forest {
  std::vector<std::uint32_t> parent, last, count;
  std::uint32_t add(path_values v) {
    parent.push_back(nil);
    last.push_back(v.last);
    count.push_back(v.count);
    return static_cast<std::uint32_t>(parent.size() - 1);
  }
  void paint(std::uint32_t x, std::uint32_t v) {
    for (std::uint32_t y = x; y != nil; y = parent[y]) {
      last[y] = v;
      ++count[y];
    }
  }
  bool is_ancestor(std::uint32_t a, std::uint32_t x) const {
    for (std::uint32_t y = x; y != nil; y = parent[y])
      if (y == a) return true;
    return false;
  }
};

}  // namespace

TEST_CASE("path_paint_forest: paints, reads, cuts and links agree with walking the paths") {
  std::size_t reads = 0;
  for (std::uint64_t seed = 1; seed <= 40; ++seed) {
    lcg g{seed};
    forest f;
    brute_forest b;
    f.add({nil, 0});
    b.add({nil, 0});
    // Deep forests (a chain) on some seeds, bushy ones on others.
    const bool chain = seed % 4 == 0;
    std::uint32_t paint_value = 0;
    for (int step = 0; step < 3000; ++step) {
      const auto n = static_cast<std::uint32_t>(b.parent.size());
      const std::size_t op = g.below(10);
      INFO("seed " << seed << " step " << step << " op " << op);
      if (op < 3) {  // a new leaf
        const auto p = chain ? n - 1 : static_cast<std::uint32_t>(g.below(n));
        const auto x = f.add({nil, 0});
        REQUIRE(b.add({nil, 0}) == x);
        f.link(x, p);
        b.parent[x] = p;
      } else if (op < 5) {  // paint (values not necessarily increasing on odd seeds)
        const auto x = static_cast<std::uint32_t>(g.below(n));
        const std::uint32_t v =
            seed % 2 ? static_cast<std::uint32_t>(g.below(1000)) : paint_value++;
        f.paint(x, v);
        b.paint(x, v);
      } else if (op < 8) {  // read
        const auto x = static_cast<std::uint32_t>(g.below(n));
        const auto v = f.read(x);
        REQUIRE(v.last == b.last[x]);
        REQUIRE(v.count == b.count[x]);
        ++reads;
      } else if (op == 8) {  // a node inserted above x (the automaton's clone)
        const auto x = static_cast<std::uint32_t>(g.below(n));
        const auto clone = f.add(f.read(x));
        REQUIRE(b.add({b.last[x], b.count[x]}) == clone);
        const std::uint32_t above = b.parent[x];
        f.link(clone, above);
        b.parent[clone] = above;
        f.cut(x);
        f.link(x, clone);
        b.parent[x] = clone;
      } else {  // x moved under a node outside its subtree (or made a root)
        const auto x = static_cast<std::uint32_t>(g.below(n));
        const auto p = static_cast<std::uint32_t>(g.below(n + 1));
        f.cut(x);
        b.parent[x] = nil;
        if (p < n && !b.is_ancestor(x, p)) {
          f.link(x, p);
          b.parent[x] = p;
        }
      }
    }
    for (std::uint32_t x = 0; x < b.parent.size(); ++x) {
      const auto v = f.read(x);
      REQUIRE(v.last == b.last[x]);
      REQUIRE(v.count == b.count[x]);
    }
  }
  CHECK(reads > 30000);
}
