// bench/support/timing.hpp - clocks and the paired reference/subject timer of the benchmarks.
//
// The machine the benchmarks run on is shared and noisy, so a benchmark times its subject and a
// reference in the same iteration (`paired_timer`) and reports their ratio: a slow phase of the
// machine hits both sides alike.
#pragma once

#include <benchmark/benchmark.h>

#include <chrono>
#include <string>

#include <time.h>

namespace specdec::bench {

/// CPU time of the calling thread (CLOCK_THREAD_CPUTIME_ID), in seconds: time other processes
/// take on the shared cores is not counted.
struct thread_cpu_clock {
  static double now() noexcept {
    timespec t{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
  }
};

/// Wall time (std::chrono::steady_clock), in seconds.
struct wall_clock {
  static double now() noexcept {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
};

/// Seconds `f()` takes on `Clock`.
template <class Clock, class F>
double time_call(F&& f) {
  const double start = Clock::now();
  f();
  return Clock::now() - start;
}

/**
 * Times a subject and a reference, each call on its own, and sums both over the iterations of a
 * benchmark. A benchmark calls reference() and subject() once per iteration in the order it
 * wants (with untimed work between them if needed), passes the subject's seconds to
 * State::SetIterationTime (manual time), and calls report() after the loop.
 */
template <class Clock>
class paired_timer {
 public:
  /// Runs and times the reference; returns its seconds.
  template <class F>
  double reference(F&& f) {
    const double s = time_call<Clock>(f);
    reference_s_ += s;
    return s;
  }
  /// Runs and times the subject; returns its seconds.
  template <class F>
  double subject(F&& f) {
    const double s = time_call<Clock>(f);
    subject_s_ += s;
    return s;
  }

  double reference_seconds() const noexcept { return reference_s_; }
  double subject_seconds() const noexcept { return subject_s_; }
  /// sum(subject) / sum(reference) over the same iterations.
  double ratio() const noexcept { return subject_s_ / reference_s_; }

  /// Counters: `ref_us` (the reference per iteration) and `ratio_name` (ratio()); with
  /// `with_us`, also `us` (the subject per iteration).
  void report(benchmark::State& state, const std::string& ratio_name = "ratio",
              bool with_us = false) const {
    const auto iterations = static_cast<double>(state.iterations());
    if (with_us) state.counters["us"] = 1e6 * subject_s_ / iterations;
    state.counters["ref_us"] = 1e6 * reference_s_ / iterations;
    state.counters[ratio_name] = ratio();
  }

 private:
  double reference_s_ = 0.0, subject_s_ = 0.0;
};

}  // namespace specdec::bench
