// detail::times_weights: a few rows times a row-major weight matrix, against Eigen's product.
#include <catch2/catch.hpp>
#include <specdec/detail/weight_product.hpp>

#include <Eigen/Core>
#include <thread>
#include <vector>

using specdec::row_matrix;

namespace {
// The largest |a - b| over the largest |b| (1 when b is zero).
float relative_error(const row_matrix& a, const row_matrix& b) {
  const float scale = std::max(1.0f, b.cwiseAbs().maxCoeff());
  return (a - b).cwiseAbs().maxCoeff() / scale;
}
}  // namespace

TEST_CASE("times_weights: equals Eigen's product for every row count, width and tail") {
  // Rows: one (matrix-vector), the tiles' 1 to 4 and their remainders, the cut-over to Eigen's
  // general product past 64. Outputs: odd counts leave a single weight row after the pairs.
  // Inputs: below, at and past a packet, with a scalar tail.
  for (const Eigen::Index n : {1, 2, 3, 4, 5, 7, 9, 64, 65})
    for (const Eigen::Index out : {1, 2, 3, 5})
      for (const Eigen::Index in : {1, 7, 8, 17, 33}) {
        CAPTURE(n, out, in);
        const row_matrix x = row_matrix::Random(n, in), w = row_matrix::Random(out, in);
        const row_matrix start = row_matrix::Random(n, out);
        const row_matrix product = x * w.transpose();
        row_matrix y = row_matrix::Constant(n, out, 7.0f);
        specdec::detail::times_weights(x, w, y);
        CHECK(relative_error(y, product) < 1e-5f);
        y = start;
        specdec::detail::times_weights(x, w, y, true);
        CHECK(relative_error(y, start + product) < 1e-5f);
      }
}

TEST_CASE("times_weights: reads and writes blocks with their strides") {
  // The EAGLE step's use: the left and right column blocks of a wider weight, into the top rows
  // of a taller buffer, from rows of a wider one.
  const row_matrix w = row_matrix::Random(6, 2 * 10), x = row_matrix::Random(5, 13);
  for (const Eigen::Index n : {1, 3}) {
    CAPTURE(n);
    row_matrix y = row_matrix::Zero(7, 9);
    specdec::detail::times_weights(x.topRows(n).leftCols(10), w.rightCols(10),
                                   y.topRows(n).rightCols(6));
    const row_matrix expected = x.topRows(n).leftCols(10) * w.rightCols(10).transpose();
    CHECK(relative_error(y.topRows(n).rightCols(6), expected) < 1e-5f);
    CHECK(y.topRows(n).leftCols(3).isZero());  // nothing outside the block was written
    CHECK(y.bottomRows(7 - n).isZero());
  }
}

namespace {
// draft_threads that run every chunk on the calling thread, last chunk first, and count them.
struct reversed_runner {
  std::size_t runs = 0, chunks = 0;
  specdec::draft_threads lend(std::size_t threads) {
    return {.run = [](void* self, std::size_t chunks, specdec::draft_threads::job_fn job,
                      void* job_context) {
              auto& r = *static_cast<reversed_runner*>(self);
              ++r.runs;
              r.chunks += chunks;
              for (std::size_t i = chunks; i-- > 0;) job(job_context, i);
            },
            .context = this,
            .threads = threads};
  }
};

// draft_threads on real threads: chunk i on thread i (a thread per chunk, started per run).
specdec::draft_threads spawning() {
  return {.run = [](void*, std::size_t chunks, specdec::draft_threads::job_fn job,
                    void* job_context) {
            std::vector<std::thread> threads;
            for (std::size_t i = 1; i < chunks; ++i) threads.emplace_back(job, job_context, i);
            job(job_context, 0);
            for (auto& t : threads) t.join();
          },
          .context = nullptr,
          .threads = 3};
}
}  // namespace

TEST_CASE("times_weights with draft_threads: the split product is the unsplit one, bit for bit") {
  using specdec::detail::times_weights;
  for (const Eigen::Index n : {1, 2, 3, 5, 65})
    for (const Eigen::Index out : {250, 257, 1000})
      for (const Eigen::Index in : {300, 301}) {
        CAPTURE(n, out, in);
        const row_matrix x = row_matrix::Random(n, in), w = row_matrix::Random(out, in);
        const row_matrix start = row_matrix::Random(n, out);
        row_matrix alone = start, split = start, threaded = start;
        times_weights(x, w, alone, true);
        reversed_runner runner;
        times_weights(x, w, split, true, runner.lend(4));
        times_weights(x, w, threaded, true, spawning());
        CHECK(runner.runs == 1);  // every shape here has 64K weights or more
        CHECK(runner.chunks == 4);  // out / 4, rounded up to whole 16-float lines
        CHECK((split.array() == alone.array()).all());
        CHECK((threaded.array() == alone.array()).all());
      }
}

TEST_CASE("times_weights with draft_threads: small products and one thread stay on the caller") {
  using specdec::detail::times_weights;
  const row_matrix x = row_matrix::Random(2, 64), w = row_matrix::Random(512, 64);  // 32K weights
  row_matrix y(2, 512);
  reversed_runner runner;
  times_weights(x, w, y, false, runner.lend(2));
  CHECK(runner.runs == 0);
  const row_matrix big = row_matrix::Random(512, 256);
  row_matrix z(2, 512);
  const row_matrix xb = row_matrix::Random(2, 256);
  times_weights(xb, big, z, false, runner.lend(1));
  CHECK(runner.runs == 0);
  times_weights(xb, big, z, false, runner.lend(2));
  CHECK(runner.runs == 1);
  CHECK(runner.chunks == 2);
  // Blocks with strides, as the EAGLE step passes them: columns of a wider weight, top rows of a
  // taller output.
  const row_matrix wide = row_matrix::Random(600, 2 * 128), xs = row_matrix::Random(3, 128);
  row_matrix tall = row_matrix::Zero(5, 600), expect = row_matrix::Zero(5, 600);
  times_weights(xs, wide.rightCols(128), expect.topRows(3));
  times_weights(xs, wide.rightCols(128), tall.topRows(3), false, runner.lend(3));
  CHECK((tall.array() == expect.array()).all());
}
