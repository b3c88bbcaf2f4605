// specdec/detail/conformance.hpp - the conformance kit's machinery: model sources (a model or a
// factory), the logits comparer, the reference run and run_check, which turns a failure into a
// result.
#pragma once

#include <algorithm>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <functional>
#include <limits>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "specdec/concepts/language_model.hpp"
#include "specdec/concepts/tree_language_model.hpp"
#include "specdec/testing/result.hpp"
#include "specdec/types.hpp"

namespace specdec::testing {

namespace detail {

/// A factory: callable with no arguments, returning a LanguageModel by value (a reference is
/// refused: each call must make a new model). That each model starts empty is checked when it is
/// made (with_fresh); that it refers to nothing the factory destroyed cannot be checked.
template <class S>
concept model_factory = std::invocable<S&> && !std::is_reference_v<std::invoke_result_t<S&>> &&
                        LanguageModel<std::invoke_result_t<S&>>;

template <class S>
concept model_source = LanguageModel<S> || model_factory<S>;

template <class S>
struct model_of {
  using type = S;
};
template <class S>
requires(!LanguageModel<S> && model_factory<S>) struct model_of<S> {
  using type = std::invoke_result_t<S&>;
};

template <class>
inline constexpr bool always_false = false;

/// One readable error for a source run_all cannot take, instead of a wall of constraint notes.
template <class S>
constexpr bool check_model_source() {
  if constexpr (LanguageModel<S>) {
  } else if constexpr (!std::invocable<S&>) {
    // Not a factory: taken for a model, so that the error names the member it lacks.
    specdec::detail::check_language_model<S>();
  } else if constexpr (std::is_reference_v<std::invoke_result_t<S&>>) {
    static_assert(always_false<S>,
                  "specdec::testing: the factory returns a reference; it must return a new model "
                  "by value on every call, [&] { return my_model(...); }. To check a model you "
                  "keep, pass the model itself: run_all(model, options)");
  } else if constexpr (!LanguageModel<std::invoke_result_t<S&>>) {
    // The factory's result is taken for the model, so that the error names the member it lacks.
    specdec::detail::check_language_model<std::invoke_result_t<S&>>();
  }
  return true;
}

/// Thrown inside a check to stop it with a failure message; never escapes the kit.
struct check_failed {
  std::string message;
};

/// Calls fn(model&) on a fresh model: a new one from a factory, or `source` after truncate(0).
/// A factory's model must start empty; one that does not fails the check that made it.
template <class S, class F>
void with_fresh(S& source, F&& fn) {
  if constexpr (LanguageModel<S>) {
    source.truncate(0);
    std::forward<F>(fn)(source);
  } else {
    auto m = source();
    if (const std::size_t n = m.size(); n != 0)
      throw check_failed{"the factory returned a model with size() = " + std::to_string(n) +
                         ", not 0: it must return a model with a new, empty context on every "
                         "call (a model over a session the factory did not create shares that "
                         "session between checks: pass such a model itself, "
                         "run_all(model, options))"};
    std::forward<F>(fn)(m);
  }
}

inline std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

/// Compares rows of logits; keeps the largest difference in `max_out` (a result's field).
class comparer {
 public:
  comparer(float tolerance, std::size_t vocab, float& max_out,
           std::string expected_name = "expected", std::string actual_name = "got")
      : tol_(tolerance),
        v_(vocab),
        max_(max_out),
        e_name_(std::move(expected_name)),
        a_name_(std::move(actual_name)) {}

  /// Rows `expected` and `actual` (n * V each) are the logits after positions first..first+n-1,
  /// whose tokens are `tokens` (for the message).
  void rows(std::span<const float> expected, std::span<const float> actual,
            std::span<const token_id> tokens, std::size_t first, const std::string& what) {
    for (std::size_t r = 0; r * v_ < expected.size(); ++r) {
      for (std::size_t t = 0; t < v_; ++t) {
        const float e = expected[r * v_ + t], a = actual[r * v_ + t];
        const float d = std::fabs(e - a);
        const bool finite = std::isfinite(e) && std::isfinite(a);
        if (finite && d <= tol_) {
          max_ = std::max(max_, d);
          continue;
        }
        if (finite) max_ = std::max(max_, d);
        throw check_failed{
            what + ": position " + std::to_string(first + r) + " (token " +
            std::to_string(r < tokens.size() ? tokens[r] : -1) + "), logit " + std::to_string(t) +
            ": " + e_name_ + " " + num(e) + ", " + a_name_ + " " + num(a) + " (|diff| " +
            num(finite ? d : std::numeric_limits<float>::infinity()) + " > tolerance " + num(tol_) +
            "; largest |diff| so far " + num(max_) + ")"};
      }
    }
  }

 private:
  float tol_;
  std::size_t v_;
  float& max_;
  std::string e_name_, a_name_;
};

inline void expect(bool cond, const std::string& message) {
  if (!cond) throw check_failed{message};
}

template <class M>
std::vector<token_id> sequence_for(const conformance_options& o, const M& m) {
  if (!o.tokens.empty()) return o.tokens;
  const std::size_t v = m.vocab_size();
  std::size_t n = 16;
  const std::size_t cap = max_size_of(m);
  if (cap / 2 < n) n = std::max<std::size_t>(2, cap / 2);
  std::vector<token_id> t(n);
  for (std::size_t i = 0; i < n; ++i) t[i] = static_cast<token_id>((7 * i + 1) % v);
  return t;
}

template <class M>
void check_inputs(const conformance_options& o, const M& m, std::span<const token_id> seq) {
  if (!(o.tolerance >= 0.0f))
    throw check_failed{"conformance_options::tolerance = " + num(o.tolerance) + " must be >= 0"};
  if (seq.size() < 2)
    throw check_failed{"conformance_options::tokens has " + std::to_string(seq.size()) +
                       " tokens; the checks need at least 2"};
  for (const token_id t : seq)
    if (t < 0 || static_cast<std::size_t>(t) >= m.vocab_size())
      throw check_failed{"conformance_options::tokens holds " + std::to_string(t) +
                         ", outside the model's vocabulary [0, " + std::to_string(m.vocab_size()) +
                         ")"};
}

/// The sequence the checks use (options or default), after validating it and the options.
template <class M>
std::vector<token_id> checked_sequence(const conformance_options& o, const M& m) {
  auto seq = sequence_for(o, m);
  check_inputs(o, m, seq);
  return seq;
}

/// Appends `tokens` in one call and returns the logits.
template <class M>
std::vector<float> append(M& m, std::span<const token_id> tokens) {
  std::vector<float> out(tokens.size() * m.vocab_size());
  m.append(tokens, std::span<float>(out));
  return out;
}

/// The checked sequence and the logits of appending it in one call to a fresh model.
struct reference_run {
  std::vector<token_id> seq;
  std::vector<float> logits;  ///< seq.size() rows of `vocab` logits
  std::size_t vocab = 0;
};

template <class S>
reference_run reference(S& source, const conformance_options& o) {
  reference_run ref;
  with_fresh(source, [&](auto& m) {
    ref.seq = checked_sequence(o, m);
    ref.vocab = m.vocab_size();
    ref.logits = append(m, ref.seq);
  });
  return ref;
}

/// Fails with "<what> did not throw" unless `call()` throws (anything).
template <class F>
void expect_throws(F&& call, const std::string& what) {
  bool threw = false;
  try {
    std::forward<F>(call)();
  } catch (...) {
    threw = true;
  }
  expect(threw, what + " did not throw");
}

/// Runs `body(result)` and turns check_failed / model exceptions into a failed result.
template <class Body>
check_result run_check(const char* name, Body&& body) {
  check_result r;
  r.name = name;
  try {
    std::forward<Body>(body)(r);
  } catch (const check_failed& f) {
    r.ok = false;
    r.message = f.message;
  } catch (const std::exception& e) {
    r.ok = false;
    r.message = std::string("the model threw unexpectedly: ") + e.what();
  } catch (...) {
    r.ok = false;
    r.message = "the model threw a non-standard exception";
  }
  if (r.ok && r.message.empty()) r.message = "largest |diff| " + num(r.max_abs_diff);
  r.message = r.name + ": " + r.message;
  return r;
}

}  // namespace detail

}  // namespace specdec::testing
