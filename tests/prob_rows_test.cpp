// prob_rows: row_matrix's calls on storage that only grows.
#include <catch2/catch.hpp>
#include <specdec/concepts/drafter.hpp>
#include <specdec/math/prob_rows.hpp>

#include <stdexcept>

using specdec::prob_rows;
using specdec::row_matrix;

TEST_CASE("prob_rows: resizing within the capacity keeps the storage") {
  prob_rows q;
  CHECK(q.rows() == 0);
  q.resize(4, 10);
  const float* storage = q.data();
  CHECK(q.capacity() == 40);
  q.resize(0, 10);
  CHECK(q.rows() == 0);
  CHECK(q.cols() == 10);
  q.resize(3, 10);
  CHECK(q.data() == storage);
  q.resize(2, 20);
  CHECK(q.data() == storage);
  q.resize(5, 10);  // past the capacity: grows
  CHECK(q.capacity() == 50);
  CHECK_THROWS_AS(q.resize(-1, 10), std::invalid_argument);
}

TEST_CASE("prob_rows: reads and writes like a row_matrix") {
  prob_rows q;
  q.setConstant(2, 3, 0.5f);
  q(1, 2) = 2.0f;
  q.row(0)(1) = 1.0f;
  CHECK(q.row(1).sum() == Approx(3.0));
  CHECK(q.view()(0, 1) == 1.0f);
  CHECK(q.data()[5] == 2.0f);
  SECTION("conservativeResize keeps the leading rows, growing or not") {
    q.conservativeResize(1, 3);
    CHECK(q(0, 1) == 1.0f);
    q.conservativeResize(4, 3);
    CHECK(q(0, 0) == 0.5f);
    CHECK(q(0, 1) == 1.0f);
  }
  SECTION("assignment from an Eigen expression, copies of the rows in use") {
    q = row_matrix::Identity(3, 3);
    CHECK(q.rows() == 3);
    CHECK(q(2, 2) == 1.0f);
    CHECK(q(2, 1) == 0.0f);
    const prob_rows copy = q;
    CHECK(copy.matrix() == row_matrix::Identity(3, 3));
    q.setZero();
    CHECK(copy(1, 1) == 1.0f);
  }
}

TEST_CASE("prob_rows: draft::clear empties the draft and keeps q's storage") {
  specdec::draft d;
  d.tokens = {1, 2};
  d.q.resize(2, 8);
  const float* storage = d.q.data();
  CHECK(!d.deterministic());
  d.clear();
  CHECK(d.deterministic());
  CHECK(d.size() == 0);
  d.q.resize(2, 8);
  CHECK(d.q.data() == storage);
}
