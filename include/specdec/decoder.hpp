// specdec/decoder.hpp - the loop: draft -> target -> verify -> commit, and plain decoding.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <functional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "specdec/concepts/drafter.hpp"
#include "specdec/concepts/language_model.hpp"
#include "specdec/concepts/tree_drafter.hpp"
#include "specdec/decode/options.hpp"
#include "specdec/draft/no_drafter.hpp"
#include "specdec/math/rng.hpp"
#include "specdec/math/sampling_params.hpp"
#include "specdec/stats.hpp"
#include "specdec/tree/token_tree.hpp"
#include "specdec/tree/tree_draft.hpp"
#include "specdec/tree/tree_fallback.hpp"
#include "specdec/tree/tree_plan.hpp"
#include "specdec/types.hpp"
#include "specdec/verify/block.hpp"
#include "specdec/verify/greedy.hpp"
#include "specdec/verify/multi_candidate.hpp"
#include "specdec/verify/rejection.hpp"

namespace specdec {

/**
 * Speculative decoding of a Target with a Drafter: each step the drafter proposes up to K tokens,
 * the target scores [last token, drafts...] in one append, the verifier keeps a prefix and adds
 * one token of the target's own, and both caches are rolled back to what was kept.
 *
 * Guarantees: with temperature 0 the output equals greedy decoding of the target as the decoder
 * evaluates it (token for token); with temperature > 0 each token is distributed exactly as
 * sampling the warped target alone. Given the same seed, the same tokens come out.
 *
 * Cache invariant between calls: the target's context holds the prompt and every emitted token
 * except the last one (whose logits nobody needed yet). Stop tokens and max_new_tokens that fall
 * inside an accepted block cut it there and roll the caches back accordingly. Any exception
 * leaves the target's context consistent with history() and the decoder usable.
 *
 * Use generate() for a whole run, or start() then step() until done() to drive it from an
 * engine's own scheduler. The decoder holds references: the models and the drafter must outlive
 * it. Not thread-safe. (Target must model LanguageModel and Draft must model Drafter; the class
 * checks it with a static_assert that says what is missing.)
 */
template <class Target, class Draft = no_drafter>
class speculative_decoder {
  static_assert(detail::check_language_model<Target>());
  static_assert(detail::check_drafter<Draft>());

 public:
  /// Throws std::invalid_argument if the drafter has a vocabulary that differs from the target's,
  /// or drafts with the target object itself (they would overwrite each other's cache).
  speculative_decoder(Target& target, Draft& drafter) : target_(target), drafter_(drafter) {
    if constexpr (requires { drafter.vocab_size(); }) {
      const std::size_t dv = static_cast<std::size_t>(drafter.vocab_size());
      if (dv != vocab())
        throw std::invalid_argument("drafter: draft vocab_size " + std::to_string(dv) +
                                    " differs from the target's vocab_size " +
                                    std::to_string(vocab()));
    }
    if constexpr (requires {
                    { &drafter.model() } -> std::convertible_to<const void*>;
                  }) {
      if (static_cast<const void*>(&drafter.model()) == static_cast<const void*>(&target))
        throw std::invalid_argument(
            "drafter: the draft model is the target itself; both need their own context (use a "
            "second instance, or a view with its own cache such as a layer-skip draft)");
    }
  }

  /// Runs a whole generation: start(prompt, options) then step() until done().
  generate_result generate(std::span<const token_id> prompt, const generate_options& options) {
    start(prompt, options);
    while (!done()) step();
    generate_result r;
    r.tokens.assign(history_.begin() + static_cast<std::ptrdiff_t>(prompt_size_), history_.end());
    r.stats = stats_;
    r.reason = reason_;
    return r;
  }

  /**
   * Validates prompt and options, resets the statistics, the rng (options.sampling.seed) and the
   * drafter, and feeds the prompt (all but its last token) to the target.
   * Throws std::invalid_argument naming the bad argument: empty prompt, a token outside the
   * vocabulary, a prompt longer than the target's max_size, bad options. The decoder is then
   * idle (done()) and the models untouched.
   */
  void start(std::span<const token_id> prompt, const generate_options& options) {
    validate(prompt, options);
    const auto t0 = clock::now();
    // The target holds history_ minus its last token while the decoder's invariant stands.
    std::size_t keep = 0;
    if (options.reuse_prefix && !history_.empty() &&
        static_cast<std::size_t>(target_.size()) + 1 == history_.size()) {
      const std::size_t limit = std::min(history_.size() - 1, prompt.size() - 1);
      while (keep < limit && history_[keep] == prompt[keep]) ++keep;
    }
    std::vector<token_id> fresh(prompt.begin(), prompt.end());  // `prompt` may view history_
    options_ = options;
    gen_.reseed(options.sampling.seed);
    stats_ = decode_stats{};
    plan_ = tree_plan{};
    if (options_.replan.every > 0 && !measured_.offered_at_rank.empty()) replan();
    done_ = true;
    history_.swap(fresh);
    prompt_size_ = history_.size();
    drafter_.reset();
    if constexpr (requires { drafter_.model_calls(); })
      draft_calls_at_start_ = drafter_.model_calls();
    target_.truncate(keep);
    if (history_.size() - 1 > keep) {
      const std::span<const token_id> rest(history_.data() + keep, history_.size() - 1 - keep);
      logits_.resize(rest.size() * vocab());
      try {
        target_.append(rest, std::span<float>(logits_));
      } catch (...) {
        target_.truncate(0);
        history_.clear();
        throw;
      }
    }
    stats_.reused_prompt_tokens = keep;
    done_ = false;
    reason_ = stop_reason::max_new_tokens;
    update_done();
    stats_.prefill_seconds = seconds_since(t0);
    stats_.total_seconds = stats_.prefill_seconds;
  }

  /// One draft -> target -> verify -> commit iteration; emits between 1 and K + 1 tokens (for a
  /// tree, 1 to depth + 1). Throws std::logic_error if called when done().
  step_result step() {
    if (done_) throw std::logic_error("speculative_decoder::step: no generation in progress");
    if (options_.replan.every > 0 && stats_.target_calls > 0 &&
        stats_.target_calls % options_.replan.every == 0)
      replan();
    if constexpr (TreeDrafter<Draft>) {
      if (!options_.tree.empty()) return tree_step();
    }
    const auto t0 = clock::now();
    const std::size_t v = vocab();
    const std::size_t h = history_.size();
    const std::size_t k = std::min(options_.draft_length, draft_budget());

    // 1. draft
    draft_.clear();
    if (k > 0) drafter_.propose(history_, k, options_.sampling, gen_, draft_);
    const auto t1 = clock::now();
    const std::size_t n = std::min(draft_.size(), k);
    for (std::size_t i = 0; i < n; ++i) check_draft_token(draft_.tokens[i]);
    if (!draft_.deterministic() && (static_cast<std::size_t>(draft_.q.rows()) < n ||
                                    static_cast<std::size_t>(draft_.q.cols()) != v))
      throw std::invalid_argument("drafter: q must have one row of vocab_size per draft token");

    // 2. target: [last token, drafts...] in one append
    feed_.assign(1, history_.back());
    feed_.insert(feed_.end(), draft_.tokens.begin(),
                 draft_.tokens.begin() + static_cast<std::ptrdiff_t>(n));
    logits_.resize((n + 1) * v);
    target_.append(feed_, std::span<float>(logits_));  // model contract: throws => unchanged
    const auto t2 = clock::now();

    // 3. verify
    verify_result verdict;
    try {
      const logits_view rows(logits_.data(), static_cast<Eigen::Index>(n + 1),
                             static_cast<Eigen::Index>(v));
      const std::span<const token_id> drafts(draft_.tokens.data(), n);
      const logits_view q(draft_.q.data(),
                          draft_.deterministic() ? 0 : static_cast<Eigen::Index>(n),
                          static_cast<Eigen::Index>(v));
      // Exact-match verification when greedy (verify_rejection delegates to verify_greedy).
      verdict = options_.verification == chain_verification::block
                    ? verify_block(rows, drafts, q, options_.sampling, gen_, block_ws_)
                    : verify_rejection(rows, drafts, q, options_.sampling, gen_, verify_ws_);
    } catch (...) {
      target_.truncate(h - 1);
      throw;
    }
    const auto t3 = clock::now();
    // The target's context now holds the history and the accepted drafts: commit is a truncate
    // (inside emit).
    accepted_tokens_.assign(draft_.tokens.begin(),
                            draft_.tokens.begin() + static_cast<std::ptrdiff_t>(verdict.accepted));
    // By depth: position d was judged when every draft before it was kept.
    for (std::size_t d = 0; d < n && d <= verdict.accepted; ++d)
      count_rank(d, 0, 1, d < verdict.accepted);
    return emit(h, verdict.next, n, n, t0, t1, t2, t3);
  }

  /// True when no generation is in progress or the current one has finished.
  bool done() const noexcept { return done_; }
  /// Why the last generation ended (meaningful once done()).
  stop_reason reason() const noexcept { return reason_; }
  /// Prompt + emitted tokens of the current generation.
  std::span<const token_id> history() const noexcept { return history_; }
  const decode_stats& stats() const noexcept { return stats_; }
  /// Drops the acceptance measured for re-planning (generate_options::replan): the next
  /// generation starts from the shape its options give.
  void forget_measurements() noexcept { measured_ = decode_stats{}; }
  /// The last re-planned shape (generate_options::replan), empty before the first plan.
  const tree_plan& plan() const noexcept { return plan_; }
  Target& target() noexcept { return target_; }
  Draft& drafter() noexcept { return drafter_; }

 private:
  using clock = std::chrono::steady_clock;
  static double seconds(clock::duration d) { return std::chrono::duration<double>(d).count(); }
  static double seconds_since(clock::time_point t) { return seconds(clock::now() - t); }

  std::size_t vocab() const { return static_cast<std::size_t>(target_.vocab_size()); }

  // How many draft positions this step may use: the last token of a step is the target's own,
  // and every emitted token must fit in the target's context.
  std::size_t draft_budget() const {
    const std::size_t remaining = options_.max_new_tokens - generated();
    const std::size_t room = max_size_of(target_) - history_.size();  // >= 1 while not done
    return std::min(remaining - 1, room - 1);
  }

  void check_draft_token(token_id t) const {
    if (t < 0 || static_cast<std::size_t>(t) >= vocab())
      throw std::invalid_argument("drafter: proposed token " + std::to_string(t) +
                                  " outside the vocabulary [0, " + std::to_string(vocab()) + ")");
  }

  // One multi-candidate step: draft a tree, score it in one target call (tree attention, or the
  // path-by-path fallback), walk it with the multi-candidate verifier, keep the accepted path.
  step_result tree_step() {
    const auto t0 = clock::now();
    const std::size_t v = vocab();
    const std::size_t h = history_.size();
    const std::size_t depth = std::min(options_.tree.size(), draft_budget());
    if (depth > 0) {
      drafter_.propose_tree(history_, std::span<const std::size_t>(options_.tree).first(depth),
                            options_.sampling, gen_, options_.tree_draw, tree_draft_);
    } else {
      tree_draft_.tree = token_tree(history_.back());
      tree_draft_.q.resize(0, static_cast<Eigen::Index>(v));
      tree_draft_.draw = candidate_draw::deterministic;
    }
    const auto t1 = clock::now();
    const token_tree& tree = tree_draft_.tree;
    if (tree.token(0) != history_.back())
      throw std::invalid_argument("drafter: the tree's root must be the last history token");
    if (tree.max_depth() > depth)
      throw std::invalid_argument("drafter: the tree is deeper than requested");
    for (std::size_t i = 1; i < tree.size(); ++i) check_draft_token(tree.token(i));
    const bool sampled_q = tree_draft_.draw != candidate_draw::deterministic;

    logits_.resize(tree.size() * v);
    evaluate_tree(target_, tree, std::span<float>(logits_), tree_eval_ws_);  // throws => unchanged
    const auto t2 = clock::now();
    try {
      const logits_view rows(logits_.data(), static_cast<Eigen::Index>(tree.size()),
                             static_cast<Eigen::Index>(v));
      const logits_view q(tree_draft_.q.data(), sampled_q ? tree_draft_.q.rows() : 0,
                          static_cast<Eigen::Index>(v));
      verify_tree(tree, rows, q, tree_draft_.draw, options_.sampling, gen_, tree_verify_ws_,
                  tree_verdict_);
      path_.assign(1, 0);
      path_.insert(path_.end(), tree_verdict_.accepted.begin(), tree_verdict_.accepted.end());
      commit_tree_path(target_, tree, path_, tree_eval_ws_);
    } catch (...) {
      if constexpr (TreeLanguageModel<Target>) {
        if (target_.size() + 1 == h) target_.commit(std::span<const std::int32_t>());
      }
      target_.truncate(std::min<std::size_t>(target_.size(), h - 1));
      throw;
    }
    const auto t3 = clock::now();
    accepted_tokens_.clear();
    for (std::int32_t node : tree_verdict_.accepted)
      accepted_tokens_.push_back(tree.token(static_cast<std::size_t>(node)));
    // By depth and rank: the children of each node on the accepted path were offered.
    std::size_t parent = 0;
    for (std::size_t d = 0; !tree.is_leaf(parent); ++d) {
      const auto kids = tree.children(parent);
      const bool kept = d < tree_verdict_.accepted.size();
      const auto node = kept ? static_cast<std::size_t>(tree_verdict_.accepted[d]) : 0;
      count_rank(d, kept ? node - static_cast<std::size_t>(kids.first) : 0, kids.size(), kept);
      if (!kept) break;
      parent = node;
    }
    return emit(h, tree_verdict_.next, tree.max_depth(), tree.size() - 1, t0, t1, t2, t3);
  }

  // Replaces the shape in force with the plan for the acceptance measured so far.
  void replan() {
    const auto& r = options_.replan;
    const auto profile = acceptance_profile::from_stats(measured_, r.min_samples);
    if (profile.rate.empty()) return;  // too few steps measured yet: keep the shape in force
    bool chains = r.chains_only || options_.verification == chain_verification::block;
    if constexpr (!TreeDrafter<Draft>) chains = true;
    plan_ = chains ? plan_chain(profile, r.cost, std::min(r.max_nodes, r.max_depth))
                   : plan_tree(profile, r.cost, r.max_nodes, r.max_depth);
    const bool chain = std::all_of(plan_.branching.begin(), plan_.branching.end(),
                                   [](std::size_t k) { return k == 1; });
    if (chain) {
      options_.tree.clear();
      options_.draft_length = plan_.branching.size();
    } else {
      options_.tree = plan_.branching;
    }
  }

  // Counts, at depth d, `offered` candidates judged and (if `kept`) the rank one accepted, in
  // this generation's statistics and in the re-planning measurements.
  void count_rank(std::size_t d, std::size_t rank, std::size_t offered, bool kept) {
    stats_.count_judged(d, rank, offered, kept);
    if (options_.replan.every > 0) measured_.count_judged(d, rank, offered, kept);
  }

  // Emits accepted_tokens_ then `next`, stopping at a stop condition; rolls the target back to
  // the history minus its last token; tells the drafter; updates the statistics.
  step_result emit(std::size_t h, token_id next, std::size_t positions, std::size_t nodes,
                   clock::time_point t0, clock::time_point t1, clock::time_point t2,
                   clock::time_point t3) {
    const std::size_t accepted = accepted_tokens_.size();
    try {
      for (std::size_t i = 0; i <= accepted && !done_; ++i) {
        const token_id t = i < accepted ? accepted_tokens_[i] : next;
        history_.push_back(t);
        update_done(t);
        if (options_.on_token && !options_.on_token(t) && !done_) {
          done_ = true;
          reason_ = stop_reason::callback;
        }
      }
    } catch (...) {
      target_.truncate(history_.size() - 1);
      done_ = true;
      reason_ = stop_reason::callback;
      throw;
    }
    target_.truncate(history_.size() - 1);
    const std::span<const token_id> emitted(history_.data() + h, history_.size() - h);
    drafter_.accept(emitted);

    stats_.target_calls += 1;
    stats_.draft_calls += positions > 0;
    stats_.drafted_tokens += positions;
    stats_.drafted_nodes += nodes;
    stats_.accepted_tokens += accepted;
    if (stats_.drafted_at.size() < positions) {
      stats_.drafted_at.resize(positions);
      stats_.accepted_at.resize(positions);
    }
    for (std::size_t i = 0; i < positions; ++i) stats_.drafted_at[i] += 1;
    for (std::size_t i = 0; i < accepted; ++i) stats_.accepted_at[i] += 1;
    stats_.generated_tokens = generated();
    if constexpr (requires { drafter_.model_calls(); })
      stats_.draft_model_calls = drafter_.model_calls() - draft_calls_at_start_;
    const auto t4 = clock::now();
    stats_.draft_seconds += seconds(t1 - t0);
    stats_.target_seconds += seconds(t2 - t1);
    stats_.verify_seconds += seconds(t3 - t2);
    stats_.total_seconds += seconds(t4 - t0);
    return {emitted, positions, accepted, done_};
  }
  std::size_t generated() const noexcept { return history_.size() - prompt_size_; }

  void validate(std::span<const token_id> prompt, const generate_options& o) const {
    validate_options(prompt, o, vocab(), max_size_of(target_), TreeDrafter<Draft>);
  }

  // Marks the run done when a limit is reached (after emitting `t`, if given).
  void update_done(token_id t = -1) {
    if (t >= 0 && std::find(options_.stop_tokens.begin(), options_.stop_tokens.end(), t) !=
                      options_.stop_tokens.end()) {
      done_ = true;
      reason_ = stop_reason::stop_token;
    } else if (generated() >= options_.max_new_tokens) {
      done_ = true;
      reason_ = stop_reason::max_new_tokens;
    } else if (history_.size() >= max_size_of(target_)) {
      done_ = true;
      reason_ = stop_reason::context_full;
    }
  }

  Target& target_;
  Draft& drafter_;
  generate_options options_;
  rng gen_;
  decode_stats stats_;
  std::vector<token_id> history_;
  std::size_t prompt_size_ = 0;
  bool done_ = true;
  stop_reason reason_ = stop_reason::max_new_tokens;
  draft draft_;
  std::vector<token_id> feed_;
  std::vector<float> logits_;
  rejection_workspace verify_ws_;
  block_workspace block_ws_;
  tree_plan plan_;
  decode_stats measured_;  // rank counts of every re-planning generation of this decoder
  std::vector<token_id> accepted_tokens_;
  tree_draft tree_draft_;
  tree_eval_workspace tree_eval_ws_;
  tree_verify_workspace tree_verify_ws_;
  tree_verify_result tree_verdict_;
  std::vector<std::int32_t> path_;
  std::size_t draft_calls_at_start_ = 0;
};

/// Plain autoregressive decoding with the same sampler: one target call per token.
template <LanguageModel Model>
generate_result generate_autoregressive(Model& model, std::span<const token_id> prompt,
                                        generate_options options) {
  no_drafter none;
  options.draft_length = 0;
  options.tree.clear();
  speculative_decoder<Model, no_drafter> decoder(model, none);
  return decoder.generate(prompt, options);
}

}  // namespace specdec
