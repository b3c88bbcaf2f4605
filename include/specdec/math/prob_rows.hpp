// specdec/math/prob_rows.hpp - rows of V probabilities in storage that only grows: the q of a
// draft, written every step without allocating once it has held the largest step's rows.
#pragma once

#include <algorithm>
#include <cstddef>
#include <memory>
#include <stdexcept>

#include <Eigen/Core>

#include "specdec/types.hpp"

namespace specdec {

/**
 * A row-major rows() x cols() matrix of floats, read and written like the row_matrix it replaces
 * (rows(), cols(), data(), (i, j), row(i), resize, conservativeResize, setConstant, setZero,
 * assignment from an Eigen expression), whose storage only grows: resize to fewer elements keeps
 * the memory, so resizing to k x V every step allocates once for the largest k x V. Contents after
 * resize are unspecified (as Eigen's); conservativeResize keeps the leading rows when cols() stays.
 * No rows means "none" (a deterministic draft). Copies copy the rows in use only. Allocates with
 * operator new; O(1) per resize within capacity. Not thread-safe.
 */
class prob_rows {
 public:
  using Index = Eigen::Index;

  prob_rows() = default;
  prob_rows(Index rows, Index cols) { resize(rows, cols); }
  prob_rows(const prob_rows& o) { *this = o; }
  prob_rows(prob_rows&&) noexcept = default;
  prob_rows& operator=(const prob_rows& o) {
    if (this != &o) {
      resize(o.rows_, o.cols_);
      std::copy_n(o.data(), o.size(), data());
    }
    return *this;
  }
  prob_rows& operator=(prob_rows&&) noexcept = default;
  /// Takes the shape and values of any Eigen matrix expression (row_matrix::Zero(n, v), ...).
  template <class Derived>
  prob_rows& operator=(const Eigen::DenseBase<Derived>& m) {
    resize(m.rows(), m.cols());
    matrix() = m;
    return *this;
  }

  Index rows() const noexcept { return rows_; }
  Index cols() const noexcept { return cols_; }
  Index size() const noexcept { return rows_ * cols_; }
  /// Floats held without allocating (rows x cols up to this never allocate).
  std::size_t capacity() const noexcept { return capacity_; }
  float* data() noexcept { return data_.get(); }
  const float* data() const noexcept { return data_.get(); }

  /// rows x cols with unspecified contents; allocates only past capacity(). Throws
  /// std::invalid_argument for a negative size.
  void resize(Index rows, Index cols) {
    if (rows < 0 || cols < 0) throw std::invalid_argument("prob_rows::resize: negative size");
    reserve(static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols));
    rows_ = rows;
    cols_ = cols;
  }
  /// resize keeping the values of the leading rows when cols() stays (row-major, so they do not
  /// move); with another cols() the contents are unspecified.
  void conservativeResize(Index rows, Index cols) {
    if (rows < 0 || cols < 0)
      throw std::invalid_argument("prob_rows::conservativeResize: negative size");
    const auto n = static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols);
    if (n > capacity_) {
      std::unique_ptr<float[]> grown(new float[n]);
      if (cols == cols_) std::copy_n(data(), std::min(n, static_cast<std::size_t>(size())), grown.get());
      data_ = std::move(grown);
      capacity_ = n;
    }
    rows_ = rows;
    cols_ = cols;
  }
  /// Grows the storage to at least n floats (keeping the values); never shrinks.
  void reserve(std::size_t n) {
    if (n <= capacity_) return;
    std::unique_ptr<float[]> grown(new float[n]);  // default-initialised: not zeroed
    std::copy_n(data(), static_cast<std::size_t>(size()), grown.get());
    data_ = std::move(grown);
    capacity_ = n;
  }

  float& operator()(Index i, Index j) noexcept { return data_[static_cast<std::size_t>(i * cols_ + j)]; }
  float operator()(Index i, Index j) const noexcept {
    return data_[static_cast<std::size_t>(i * cols_ + j)];
  }
  /// Row i as an Eigen row vector mapped on the storage (valid until the next resize).
  Eigen::Map<prob_row> row(Index i) noexcept { return Eigen::Map<prob_row>(data() + i * cols_, cols_); }
  Eigen::Map<const prob_row> row(Index i) const noexcept {
    return Eigen::Map<const prob_row>(data() + i * cols_, cols_);
  }
  /// The rows in use as an Eigen matrix (for any other Eigen operation).
  Eigen::Map<row_matrix> matrix() noexcept { return Eigen::Map<row_matrix>(data(), rows_, cols_); }
  Eigen::Map<const row_matrix> matrix() const noexcept { return view(); }
  /// The rows in use as a read-only view, the form verifiers take.
  logits_view view() const noexcept { return logits_view(data(), rows_, cols_); }

  void setConstant(Index rows, Index cols, float value) {
    resize(rows, cols);
    std::fill_n(data(), static_cast<std::size_t>(size()), value);
  }
  void setConstant(float value) noexcept { std::fill_n(data(), static_cast<std::size_t>(size()), value); }
  void setZero(Index rows, Index cols) { setConstant(rows, cols, 0.0f); }
  void setZero() noexcept { setConstant(0.0f); }

 private:
  std::unique_ptr<float[]> data_;
  std::size_t capacity_ = 0;
  Index rows_ = 0, cols_ = 0;
};

}  // namespace specdec
