// specdec/draft/draft_threads.hpp - an engine's threads lent to the draft heads, so that their
// products (the heads' layers and the classifier) run on the pool the target's forward pass uses,
// which is idle while the heads draft.
#pragma once

#include <cstddef>

namespace specdec {

/**
 * Threads an engine lends to the draft heads (eagle_drafter_options::threads,
 * medusa_drafter_options::threads): `run(context, chunks, job, job_context)` must call
 * job(job_context, i) exactly once for every i in [0, chunks), on any of its threads, and return
 * when every call has returned; a job never throws. A product big enough to pay for the hand-off
 * is split into `threads` chunks of output columns, each computed exactly as the calling thread
 * would, so the drafts do not depend on the split. The decoder drafts, then scores, one after the
 * other: the pool that runs the target is free while the heads draft, so lend that one; its
 * threads are then still awake from the target's call (a pool that sleeps between jobs pays its
 * wake-up on the first product, 0.1-0.2 ms on the 2-core host of docs/results.md). With
 * several sequences drafting at once on different threads, lend a pool whose run() may be
 * called concurrently, or none. Default: no threads (the calling thread does all the work).
 *
 * An engine with a pool of the usual shape adapts it in one line, for instance
 *
 *     specdec::draft_threads lent{
 *         .run = [](void* pool, std::size_t chunks, specdec::draft_threads::job_fn job,
 *                   void* job_context) {
 *           static_cast<my_pool*>(pool)->run(chunks, job, job_context);
 *         },
 *         .context = &pool,
 *         .threads = pool.size()};
 */
struct draft_threads {
  using job_fn = void (*)(void* job_context, std::size_t chunk);
  using run_fn = void (*)(void* context, std::size_t chunks, job_fn job, void* job_context);
  run_fn run = nullptr;
  void* context = nullptr;   ///< handed to run (the engine's pool)
  std::size_t threads = 1;   ///< chunks a product is split into: the pool's size
  /// True when products are split: a run function and more than one thread.
  bool enabled() const noexcept { return run != nullptr && threads > 1; }
};

}  // namespace specdec
