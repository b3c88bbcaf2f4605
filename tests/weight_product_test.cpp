// detail::times_weights: a few rows times a row-major weight matrix, against Eigen's product.
#include <catch2/catch.hpp>
#include <specdec/detail/weight_product.hpp>

#include <Eigen/Core>

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
