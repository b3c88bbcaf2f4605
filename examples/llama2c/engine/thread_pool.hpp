// llama2c/engine/thread_pool.hpp - the engine's one small pool of threads, handed to the kernels.
//
// The calling thread works too: a pool of T threads starts T - 1 workers. A job is a count of
// chunks and a function of the chunk index; threads take chunks from a shared counter until
// none are left, so a slow core (another process, a noisy neighbour) gets fewer. Workers spin
// briefly between jobs (the engine issues one every few tens of microseconds during a forward
// pass), then sleep on a futex (std::atomic::wait), so an idle engine costs no CPU.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <specdec/draft/draft_threads.hpp>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace specdec::llama2c {

/**
 * A fixed set of threads that run one job at a time. `run()` is safe to call from several
 * threads (calls are serialised); the chunk function must not throw. No allocation per job.
 */
class thread_pool {
 public:
  /// A pool of `threads` threads (the caller included): 0 means
  /// std::thread::hardware_concurrency(). Throws std::invalid_argument for more than 256.
  explicit thread_pool(std::size_t threads = 0) {
    if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
    if (threads > 256)
      throw std::invalid_argument("llama2c::thread_pool: threads = " + std::to_string(threads) +
                                  " exceeds 256");
    threads_ = threads;
    workers_.reserve(threads - 1);
    for (std::size_t i = 1; i < threads; ++i) workers_.emplace_back([this] { work(); });
  }
  thread_pool(const thread_pool&) = delete;
  thread_pool& operator=(const thread_pool&) = delete;
  ~thread_pool() {
    stop_.store(true, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
    generation_.notify_all();
    for (auto& t : workers_) t.join();
  }

  /// Threads that run a job, the caller included.
  std::size_t size() const noexcept { return threads_; }

  /// Calls fn(context, i) for every i in [0, chunks), spread over the pool; returns when all
  /// are done. With one thread or one chunk, runs inline.
  void run(std::size_t chunks, void (*fn)(void*, std::size_t), void* context) {
    if (chunks == 0) return;
    if (workers_.empty() || chunks == 1) {
      for (std::size_t i = 0; i < chunks; ++i) fn(context, i);
      return;
    }
    std::lock_guard lock(run_mutex_);
    fn_ = fn;
    context_ = context;
    chunks_ = chunks;
    next_.store(0, std::memory_order_relaxed);
    finished_.store(0, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
    generation_.notify_all();
    take_chunks();
    // Wait for the workers to leave the job (each signals once, after its last chunk).
    for (unsigned spins = 0; finished_.load(std::memory_order_acquire) != workers_.size(); ++spins)
      pause(spins);
  }

  /// run() with a callable: f(i) for every i in [0, chunks).
  template <class F>
  void for_each(std::size_t chunks, F& f) {
    run(
        chunks, [](void* c, std::size_t i) { (*static_cast<F*>(c))(i); }, &f);
  }

 private:
  static void pause(unsigned spins) {
    if (spins < 4096) {
#if defined(__x86_64__) || defined(__i386__)
      _mm_pause();
#endif
    } else {
      std::this_thread::yield();
    }
  }

  void take_chunks() {
    for (;;) {
      const std::size_t i = next_.fetch_add(1, std::memory_order_relaxed);
      if (i >= chunks_) return;
      fn_(context_, i);
    }
  }

  void work() {
    std::uint64_t seen = 0;
    for (;;) {
      // Spin a little (the next job usually comes within microseconds), then sleep.
      std::uint64_t g = generation_.load(std::memory_order_acquire);
      for (unsigned spins = 0; g == seen && spins < 20000; ++spins) {
#if defined(__x86_64__) || defined(__i386__)
        _mm_pause();
#endif
        g = generation_.load(std::memory_order_acquire);
      }
      while (g == seen) {
        generation_.wait(seen, std::memory_order_acquire);
        g = generation_.load(std::memory_order_acquire);
      }
      seen = g;
      if (stop_.load(std::memory_order_relaxed)) return;
      take_chunks();
      finished_.fetch_add(1, std::memory_order_acq_rel);
    }
  }

  std::size_t threads_ = 1;
  std::vector<std::thread> workers_;
  std::mutex run_mutex_;
  std::atomic<std::uint64_t> generation_{0};
  std::atomic<bool> stop_{false};
  std::atomic<std::size_t> next_{0};
  std::atomic<std::size_t> finished_{0};
  void (*fn_)(void*, std::size_t) = nullptr;
  void* context_ = nullptr;
  std::size_t chunks_ = 0;
};

/// The pool lent to specdec's draft heads (eagle_drafter_options::threads): their products run
/// on it while the target, which uses it too, waits for the drafts.
inline specdec::draft_threads lend(thread_pool& pool) noexcept {
  return {.run = [](void* p, std::size_t chunks, specdec::draft_threads::job_fn job,
                    void* job_context) {
            static_cast<thread_pool*>(p)->run(chunks, job, job_context);
          },
          .context = &pool,
          .threads = pool.size()};
}

}  // namespace specdec::llama2c
