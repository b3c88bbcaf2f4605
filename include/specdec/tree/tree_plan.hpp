// specdec/tree/tree_plan.hpp - the tree shape (or chain length) that maximises predicted tokens
// per second, from measured acceptance by depth and sibling rank and a cost curve of the target
// (after Sequoia, Chen et al. 2024, restricted to the full shapes k1 x k2 x ... the drafters
// build).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "specdec/stats.hpp"
#include "specdec/tree/token_tree.hpp"

namespace specdec {

/**
 * rate[d][r]: the probability that, given the node at depth d was accepted (the root for d = 0),
 * its r-th candidate child is the one accepted at depth d + 1. For a chain only r = 0 exists.
 * Verification walks candidates in order and judges the r-th only after the earlier ones were
 * rejected, so rate[d][r] does not depend on how many candidates follow it: a profile measured
 * with wide trees serves for narrower ones.
 */
struct acceptance_profile {
  std::vector<std::vector<double>> rate;

  /// P(one of the first k candidates at depth d is accepted | depth d reached); 0 where the
  /// profile has no measurement.
  double accepted_within(std::size_t d, std::size_t k) const {
    if (d >= rate.size()) return 0.0;
    double a = 0.0;
    for (std::size_t r = 0; r < std::min(k, rate[d].size()); ++r) a += rate[d][r];
    return std::min(a, 1.0);
  }

  /// Throws std::invalid_argument, naming the depth after `who`, unless every depth has a rate,
  /// every rate is in [0, 1] and each depth's rates sum to at most 1: a profile a plan can read.
  void check(const std::string& who) const {
    for (std::size_t d = 0; d < rate.size(); ++d) {
      const std::string at = who + ".rate[" + std::to_string(d) + "]";
      if (rate[d].empty()) throw std::invalid_argument(at + ": is empty");
      double sum = 0.0;
      for (const double x : rate[d]) {
        if (!(x >= 0.0 && x <= 1.0)) throw std::invalid_argument(at + ": a rate outside [0, 1]");
        sum += x;
      }
      if (sum > 1.0 + 1e-6) throw std::invalid_argument(at + ": the rates sum past 1");
    }
  }

  /**
   * The profile a decoder measured: rate[d][r] = accepted_at_rank[d][r] / offered_at_rank[d][r]
   * where at least `min_offered` steps offered that candidate (rarer cells and every cell after
   * them at the same depth are left out: unmeasured means never planned).
   */
  static acceptance_profile from_stats(const decode_stats& s, std::size_t min_offered = 16) {
    acceptance_profile p;
    for (std::size_t d = 0; d < s.offered_at_rank.size(); ++d) {
      std::vector<double> row;
      for (std::size_t r = 0; r < s.offered_at_rank[d].size(); ++r) {
        const std::size_t offered = s.offered_at_rank[d][r];
        if (offered < min_offered) break;
        const std::size_t accepted =
            r < s.accepted_at_rank[d].size() ? s.accepted_at_rank[d][r] : 0;
        row.push_back(static_cast<double>(accepted) / static_cast<double>(offered));
      }
      if (row.empty()) break;
      p.rate.push_back(std::move(row));
    }
    return p;
  }

  /**
   * The profile the speed policy plans from (generate_options::policy.explore): measured counts
   * plus `prior` pseudo-samples of the most a cell could be, rate[d][r] = (accepted + prior x u)
   * / (offered + prior), u = 1 - the rates of the lower ranks at that depth (at least 0), and for
   * a rank r >= 1 u times c_r, the share of that room rank r's candidates took at every depth
   * together, with `prior` pseudo-samples of c_{r-1} (c_0 = 1): once second candidates were
   * measured somewhere, every depth's second candidate is expected alike instead of being tried
   * depth by depth, and a third is expected to do no better than a second. It
   * reaches one step past the evidence and no further: depth 0 always, depth d + 1 once some
   * candidate at depth d was accepted, and at each depth the ranks offered so far plus one (at
   * most max_rank). So a plan may go one position deeper (or one candidate wider) than was
   * measured, and measuring it pulls the optimism down to what the position accepts; counts
   * that decay to 0 make a cell optimistic again.
   *
   * `expected` (optional) is what is known before measuring, for instance the held-out accuracy
   * heads were trained to (expected_acceptance): a cell it has counts `expected_samples`
   * pseudo-samples of its rate instead of the optimistic ones, rate = (accepted + w x e) /
   * (offered + w) with e its rate times `scale` (at most the room left at that depth), and the
   * profile reaches its depths and ranks, and one past them, as if they were measured. `scale`
   * = (A + w) / (E + w) carries what was measured to the cells not measured yet: A is the
   * candidates accepted in the cells `expected` has, E what `expected` predicted for the same
   * offers (the sum of offered x rate). Heads whose accuracy was measured on mixed text accept
   * more than it says under greedy decoding and less at high temperature; without the scale a
   * shallow plan would keep the deeper positions at their carried rate, never measured. Throws
   * std::invalid_argument unless prior > 0 and finite, and, with `expected`, expected_samples
   * too. O(depths x max_rank + the cells counted).
   */
  static acceptance_profile optimistic(const decode_stats& s, double prior, std::size_t depths,
                                       std::size_t max_rank = 8,
                                       const acceptance_profile& expected = {},
                                       double expected_samples = 8.0) {
    if (!(prior > 0.0) || !std::isfinite(prior))
      throw std::invalid_argument("acceptance_profile::optimistic: prior must be > 0 and finite");
    if (!expected.rate.empty() && (!(expected_samples > 0.0) || !std::isfinite(expected_samples)))
      throw std::invalid_argument(
          "acceptance_profile::optimistic: expected_samples must be > 0 and finite");
    const auto count_at = [](const auto& m, std::size_t d, std::size_t r) {
      return d < m.size() && r < m[d].size() ? m[d][r] : std::size_t{0};
    };
    double measured = 0.0, predicted = 0.0;  // A and E of `scale`
    for (std::size_t d = 0; d < expected.rate.size(); ++d)
      for (std::size_t r = 0; r < expected.rate[d].size(); ++r) {
        measured += static_cast<double>(count_at(s.accepted_at_rank, d, r));
        predicted += static_cast<double>(count_at(s.offered_at_rank, d, r)) * expected.rate[d][r];
      }
    const double scale = (measured + expected_samples) / (predicted + expected_samples);
    // Rank r >= 1 pooled over the depths: the share of the room below it that its candidates
    // took, c_r = (accepted + prior c_{r-1}) / (offered x room + prior) with c_0 = 1, room from
    // the raw rates of the lower ranks at each depth. A depth's second candidate is measured
    // only by steps that branch there; trying each depth's in turn took a cold decoder most of
    // a short request.
    std::vector<double> taken, room_offered;
    for (std::size_t d = 0; d < s.offered_at_rank.size(); ++d) {
      double below = 0.0;
      for (std::size_t r = 0; r < s.offered_at_rank[d].size(); ++r) {
        const auto offered = static_cast<double>(s.offered_at_rank[d][r]);
        const auto accepted = static_cast<double>(count_at(s.accepted_at_rank, d, r));
        if (r >= 1) {
          if (taken.size() <= r) {
            taken.resize(r + 1, 0.0);
            room_offered.resize(r + 1, 0.0);
          }
          taken[r] += accepted;
          room_offered[r] += offered * std::max(0.0, 1.0 - below);
        }
        if (offered > 0.0) below += accepted / offered;
      }
    }
    // A rank's pseudo-samples are of the share the rank before it took: a candidate the
    // drafter ranks lower is not expected to do better where the ones before it failed.
    std::vector<double> share(std::max<std::size_t>(max_rank, 1), 1.0);
    for (std::size_t r = 1; r < share.size(); ++r)
      share[r] = r < taken.size() ? std::min(1.0, (taken[r] + prior * share[r - 1]) /
                                                      (room_offered[r] + prior))
                                  : share[r - 1];
    const auto pooled = [&](std::size_t r) { return share[std::min(r, share.size() - 1)]; };
    acceptance_profile p;
    for (std::size_t d = 0; d < depths; ++d) {
      const auto count = [&](const auto& m, std::size_t r) { return count_at(m, d, r); };
      std::size_t seen = 0;  // ranks offered so far
      const std::size_t offered_ranks =
          d < s.offered_at_rank.size() ? s.offered_at_rank[d].size() : 0;
      for (std::size_t r = 0; r < offered_ranks; ++r)
        if (count(s.offered_at_rank, r) > 0) seen = r + 1;
      const std::size_t known = d < expected.rate.size() ? expected.rate[d].size() : 0;
      const std::size_t ranks = std::min(std::max(seen, known) + 1, max_rank);
      std::vector<double> row;
      double below = 0.0;
      std::size_t accepted_here = 0;
      for (std::size_t r = 0; r < ranks; ++r) {
        const double room = std::max(0.0, 1.0 - below);
        const bool given = r < known;
        const double w = given ? expected_samples : prior;
        const double e = given ? std::min(room, scale * expected.rate[d][r]) : room * pooled(r);
        const double rate =
            std::min(room, (static_cast<double>(count(s.accepted_at_rank, r)) + w * e) /
                               (static_cast<double>(count(s.offered_at_rank, r)) + w));
        row.push_back(rate);
        below += rate;
        accepted_here += count(s.accepted_at_rank, r);
      }
      if (row.empty()) break;
      p.rate.push_back(std::move(row));
      // Nothing reached depth d + 1 (lately), nor is expected to: stop one past.
      if (accepted_here == 0 && !(expected.accepted_within(d, known) > 0.0)) break;
    }
    return p;
  }
};

/// What a step costs, in seconds: the target scoring n tokens in one call (target[n], n >= 1;
/// target[0] is unused), and drafting: a level of k nodes (one draft call) costs
/// draft_per_level + k x draft_per_node, so a chain of K costs K x (the two summed).
struct step_cost_model {
  std::vector<double> target;
  double draft_per_level = 0.0;
  double draft_per_node = 0.0;
  /// The target scoring a tree of n tokens in one call (append_tree), for a shape that
  /// branches, on an engine whose tree attention costs more than its causal attention
  /// (calibrate_options::trees measures it); empty = the same as `target`. A chain is scored
  /// with append, so chains always read `target`.
  std::vector<double> tree_target{};

  /// Predicted seconds of a step drafting `nodes` nodes over `levels` levels (nodes + 1 < the
  /// size of `target`); `branched`: the shape has a level wider than one.
  double seconds(std::size_t nodes, std::size_t levels, bool branched = false) const {
    const auto& t = branched && !tree_target.empty() ? tree_target : target;
    return t[nodes + 1] + draft_per_level * static_cast<double>(levels) +
           draft_per_node * static_cast<double>(nodes);
  }
  /// Throws std::invalid_argument, naming the field after `who`, unless target[1..] are
  /// positive and finite (target[1] present), tree_target is empty or the same, of target's
  /// size, and the draft costs are >= 0.
  void check(const std::string& who) const {
    const auto curve = [&](const std::vector<double>& c, const char* name) {
      if (c.size() < 2)
        throw std::invalid_argument(who + "." + name + ": needs t(1) (" + name + "[1])");
      for (std::size_t n = 1; n < c.size(); ++n)
        if (!(c[n] > 0.0) || !std::isfinite(c[n]))
          throw std::invalid_argument(who + "." + name + "[" + std::to_string(n) +
                                      "] must be positive and finite");
    };
    curve(target, "target");
    if (!tree_target.empty()) {
      if (tree_target.size() != target.size())
        throw std::invalid_argument(who + ".tree_target: has " +
                                    std::to_string(tree_target.size()) +
                                    " entries, expected target's " + std::to_string(target.size()));
      curve(tree_target, "tree_target");
    }
    if (!(draft_per_level >= 0.0) || !(draft_per_node >= 0.0))
      throw std::invalid_argument(who + ": draft costs must be >= 0");
  }
};

namespace detail {
inline bool branches(std::span<const std::size_t> shape) noexcept {
  return std::any_of(shape.begin(), shape.end(), [](std::size_t k) { return k > 1; });
}
}  // namespace detail

/// A planned shape: branching factors per depth (empty = plain decoding; all ones = a chain).
struct tree_plan {
  std::vector<std::size_t> branching;
  std::size_t nodes = 0;          ///< drafted nodes (root excluded)
  double tokens_per_step = 1.0;   ///< predicted: 1 + expected accepted drafts
  double seconds_per_step = 0.0;  ///< predicted from the cost model
  /// Predicted tokens per second; 0 when no cost was predicted.
  double tokens_per_second() const {
    return seconds_per_step > 0.0 ? tokens_per_step / seconds_per_step : 0.0;
  }
};

namespace detail {

struct plan_search {
  const acceptance_profile& profile;
  const step_cost_model& cost;
  std::size_t max_nodes, max_depth, max_width;
  bool chain_only;
  double floor;  // tokens per second a shape must beat: plain decoding's x (1 + min_gain)
  tree_plan best;
  std::vector<std::size_t> shape;

  void consider(std::size_t nodes, double tokens) {
    const double seconds = cost.seconds(nodes, shape.size(), branches(shape));
    if (tokens / seconds > std::max(best.tokens_per_second(), floor))
      best = {shape, nodes, tokens, seconds};
  }
  // Extends `shape` (whose deepest level has `width` nodes, reached with probability `reach`)
  // by one more level.
  void extend(std::size_t nodes, std::size_t width, double reach, double tokens) {
    const std::size_t d = shape.size();
    if (d >= max_depth || d >= profile.rate.size()) return;
    const std::size_t widest = chain_only ? 1 : std::min(max_width, profile.rate[d].size());
    for (std::size_t k = 1; k <= widest; ++k) {
      const std::size_t level = width * k;
      if (nodes + level > max_nodes || nodes + level + 1 >= cost.target.size()) break;
      const double next_reach = reach * profile.accepted_within(d, k);
      shape.push_back(k);
      consider(nodes + level, tokens + next_reach);
      extend(nodes + level, level, next_reach, tokens + next_reach);
      shape.pop_back();
    }
  }

  // Plain decoding, then every shape within the bounds.
  tree_plan search(double min_gain, const char* who) {
    if (!(min_gain >= 0.0) || !std::isfinite(min_gain))
      throw std::invalid_argument(std::string(who) + ": min_gain must be >= 0 and finite");
    best = {{}, 0, 1.0, cost.target[1]};
    floor = (1.0 + min_gain) / cost.target[1];
    extend(0, 1, 1.0, 1.0);
    return best;
  }
};

}  // namespace detail

/**
 * The full shape k1 x ... x kD (D <= max_depth, k_d <= the ranks the profile measured at depth
 * d, at most max_nodes drafted nodes and no more than the cost curve covers) that maximises
 * predicted tokens per second: (1 + sum over depths of P(depth reached)) / (target[nodes + 1] +
 * D x draft_per_level + nodes x draft_per_node), P(depth d reached) being the product of
 * accepted_within over the levels above. Plain decoding (an empty shape, cost target[1]) is a
 * candidate too, so a profile or a cost curve under which speculation does not pay plans no
 * drafts; a shape replaces it only when predicted more than `min_gain` faster (the speed
 * policy's margin, generate_options::policy.min_gain). Exhaustive over the shapes within the
 * bounds (a few thousand for 64 nodes). Throws std::invalid_argument for a cost model that
 * step_cost_model::check refuses, or a min_gain that is negative or not finite.
 */
inline tree_plan plan_tree(const acceptance_profile& profile, const step_cost_model& cost,
                           std::size_t max_nodes = 64, std::size_t max_depth = 8,
                           std::size_t max_width = 8, double min_gain = 0.0) {
  cost.check("plan_tree: cost");
  return detail::plan_search{profile, cost, max_nodes, max_depth, max_width, false, 0.0, {}, {}}
      .search(min_gain, "plan_tree");
}

/// plan_tree restricted to chains: the draft length K (the plan's branching is K ones; empty
/// for K = 0).
inline tree_plan plan_chain(const acceptance_profile& profile, const step_cost_model& cost,
                            std::size_t max_k = 16, double min_gain = 0.0) {
  cost.check("plan_chain: cost");
  return detail::plan_search{profile, cost, max_k, max_k, 1, true, 0.0, {}, {}}.search(
      min_gain, "plan_chain");
}

/// The plan_tree score of one given shape (to compare a hand-picked shape with the plan):
/// nodes is shape_nodes(branching), saturated at SIZE_MAX for a shape whose count does not fit
/// a size_t; seconds_per_step 0 when the cost curve does not reach that count.
inline tree_plan predict_plan(std::vector<std::size_t> branching, const acceptance_profile& profile,
                              const step_cost_model& cost) {
  tree_plan p{std::move(branching), 0, 1.0, 0.0};
  p.nodes = shape_nodes(p.branching);
  double reach = 1.0;
  for (std::size_t d = 0; d < p.branching.size(); ++d) {
    reach *= profile.accepted_within(d, p.branching[d]);
    p.tokens_per_step += reach;
  }
  if (!cost.target.empty() && p.nodes < cost.target.size() - 1)
    p.seconds_per_step = cost.seconds(p.nodes, p.branching.size(), detail::branches(p.branching));
  return p;
}

}  // namespace specdec
