// The engine's kernels against plain loops: the weight product for every batch size up to 70
// (tile remainders, output remainders, k tails), on one thread and on a pool of two, and the
// thread pool itself. Needs no checkpoint.
#include <atomic>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstddef>
#include <llama2c/engine/kernels.hpp>
#include <llama2c/engine/thread_pool.hpp>
#include <random>
#include <vector>

namespace l2 = specdec::llama2c;

namespace {

std::vector<float> random_floats(std::size_t n, unsigned seed) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}

// y = (y +) x W^T in double, the reference.
std::vector<double> reference(const std::vector<float>& x, const std::vector<float>& w,
                              const std::vector<float>& y0, std::ptrdiff_t n, std::ptrdiff_t in,
                              std::ptrdiff_t out, bool add) {
  std::vector<double> y(static_cast<std::size_t>(n * out));
  for (std::ptrdiff_t r = 0; r < n; ++r)
    for (std::ptrdiff_t o = 0; o < out; ++o) {
      double s = add ? y0[static_cast<std::size_t>(r * out + o)] : 0.0;
      for (std::ptrdiff_t k = 0; k < in; ++k)
        s += static_cast<double>(x[static_cast<std::size_t>(r * in + k)]) *
             w[static_cast<std::size_t>(o * in + k)];
      y[static_cast<std::size_t>(r * out + o)] = s;
    }
  return y;
}

}  // namespace

TEST_CASE("llama2c kernels: matmul equals the plain product for every batch size and shape") {
  l2::thread_pool two(2);
  // (in, out): k tails (in not a multiple of any packet), output remainders, and a matrix large
  // enough that the pool splits it.
  const std::ptrdiff_t shapes[][2] = {{64, 64}, {172, 64}, {64, 172}, {5, 3}, {33, 35}, {256, 512}};
  for (const auto& shape : shapes) {
    const std::ptrdiff_t in = shape[0], out = shape[1];
    const auto w = random_floats(static_cast<std::size_t>(in * out), 1);
    for (std::ptrdiff_t n : {1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 13, 17, 31, 64, 70}) {
      const auto x = random_floats(static_cast<std::size_t>(n * in), 2);
      const auto y0 = random_floats(static_cast<std::size_t>(n * out), 3);
      for (const bool add : {false, true})
        for (l2::thread_pool* pool : {static_cast<l2::thread_pool*>(nullptr), &two}) {
          auto y = y0;
          const l2::matmul_task task{w.data(), out, y.data(), out, add};
          l2::matmul(pool, x.data(), in, n, in, {&task, 1});
          const auto want = reference(x, w, y0, n, in, out, add);
          double worst = 0.0;
          for (std::size_t i = 0; i < y.size(); ++i)
            worst = std::max(worst, std::abs(y[i] - want[i]) / (1.0 + std::abs(want[i])));
          INFO("in " << in << ", out " << out << ", n " << n << ", add " << add << ", pool "
                     << (pool != nullptr));
          CHECK(worst < 1e-5);
        }
    }
  }
}

TEST_CASE("llama2c kernels: a pool's results do not depend on the thread count") {
  // Every output is computed by one thread with the same code, so one thread and two agree to
  // the bit: the engine's logits do not change with --threads.
  l2::thread_pool one(1), two(2);
  const std::ptrdiff_t in = 256, out = 1024, n = 5;
  const auto w = random_floats(static_cast<std::size_t>(in * out), 4);
  const auto x = random_floats(static_cast<std::size_t>(n * in), 5);
  std::vector<float> a(static_cast<std::size_t>(n * out)), b(a.size());
  const l2::matmul_task ta{w.data(), out, a.data(), out}, tb{w.data(), out, b.data(), out};
  l2::matmul(&one, x.data(), in, n, in, {&ta, 1});
  l2::matmul(&two, x.data(), in, n, in, {&tb, 1});
  CHECK(a == b);
}

TEST_CASE("llama2c thread_pool: every chunk runs exactly once, job after job") {
  for (std::size_t threads : {1, 2, 3}) {
    l2::thread_pool pool(threads);
    CHECK(pool.size() == threads);
    for (std::size_t chunks : {1, 2, 7, 100}) {
      std::vector<std::atomic<int>> hits(chunks);
      for (int job = 0; job < 50; ++job) {
        auto body = [&](std::size_t i) { hits[i].fetch_add(1); };
        pool.for_each(chunks, body);
      }
      for (auto& h : hits) CHECK(h.load() == 50);
    }
  }
  CHECK(l2::thread_pool(0).size() >= 1);
  CHECK_THROWS_WITH(l2::thread_pool(257), "llama2c::thread_pool: threads = 257 exceeds 256");
}
