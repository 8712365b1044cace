// The memory plan of a graph run: which intermediates live where in the
// arena, and which are recomputed instead of held (see graph.h).
#include <algorithm>
#include <numeric>

#include "singa/core/graph.h"

namespace singa {

namespace {
constexpr size_t kAlign = 64;
size_t Rounded(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }
}  // namespace

void Graph::set_recompute_budget(double share) {
  SINGA_CHECK(share >= 0 && share <= 1, ValueError,
              "recompute budget must be a share of the run time in [0, 1], got ", share);
  recompute_budget_ = share;
  memory_[0] = MemoryPlan();
  memory_[1] = MemoryPlan();
}

size_t Graph::arena_bytes(bool serial) {
  if (!planned_) Plan();
  return Memory(serial).arena;
}

size_t Graph::num_recomputed(bool serial) {
  if (!planned_) Plan();
  const MemoryPlan& plan = Memory(serial);
  size_t n = 0;
  for (const Segment& s : plan.segments) n += s.recomputed;
  return n;
}

const Graph::MemoryPlan& Graph::Memory(bool serial) {
  MemoryPlan& plan = memory_[serial];
  // Recomputing needs the op times of a first run; plan again once known.
  const bool timings = runs_ >= kTimedRuns && first_seconds_.size() == nodes_.size();
  if (plan.ready && (plan.with_timings || !timings)) return plan;
  plan = MemoryPlan();
  std::vector<size_t> at;  // op at each position of the run
  at.reserve(nodes_.size());
  ForEachOp(serial, [&](size_t i) { at.push_back(i); });

  const long none = -1;
  std::vector<long> first(blocks_.size(), none), last(blocks_.size(), none);
  for (size_t k = 0; k < at.size(); ++k)
    for (size_t b : nodes_[at[k]].blocks) {
      if (!blocks_[b].intermediate) continue;
      if (first[b] == none) first[b] = static_cast<long>(k);
      last[b] = static_cast<long>(k);
    }
  for (size_t b = 0; b < blocks_.size(); ++b)
    if (first[b] != none) plan.segments.push_back({b, at[first[b]], first[b], last[b], false});
  if (timings && recompute_budget_ > 0) Recompute(at, &plan);
  Offsets(&plan);

  plan.place.assign(nodes_.size(), {});
  plan.recompute.assign(nodes_.size(), {});
  plan.drop.assign(nodes_.size(), {});
  for (size_t s = 0; s < plan.segments.size(); ++s) {
    const Segment& seg = plan.segments[s];
    (seg.recomputed ? plan.recompute : plan.place)[at[seg.first]].push_back(s);
    plan.drop[at[seg.last]].push_back(s);
  }
  // Reruns before one op go in recorded order, so one that reads another's
  // output runs after it.
  for (auto& list : plan.recompute)
    std::sort(list.begin(), list.end(), [&](size_t a, size_t b) {
      return plan.segments[a].writer < plan.segments[b].writer;
    });
  plan.with_timings = timings;
  plan.ready = true;
  return plan;
}

// Greedy: while some intermediate is held idle across the position where
// the most bytes are live, and its writer can run again just before its
// next reader, split its life there, cheapest bytes first, within budget.
// The writer may run again when it writes nothing but intermediates (only
// it writes them, and those other than this one are still live then) and
// every block it reads is still live and unchanged; a random op reads and
// writes the generator's state block, so it never qualifies.
void Graph::Recompute(const std::vector<size_t>& at, MemoryPlan* plan) {
  const size_t n = at.size();
  std::vector<std::vector<long>> uses(blocks_.size()), writes(blocks_.size());
  for (size_t k = 0; k < n; ++k) {
    for (size_t b : nodes_[at[k]].blocks) uses[b].push_back(static_cast<long>(k));
    for (size_t b : nodes_[at[k]].writes) writes[b].push_back(static_cast<long>(k));
  }
  std::vector<Segment>& segs = plan->segments;
  std::vector<std::vector<size_t>> segs_of(blocks_.size());
  for (size_t s = 0; s < segs.size(); ++s) segs_of[segs[s].block].push_back(s);
  // live bytes at each position
  std::vector<long long> live(n + 1, 0);
  for (const Segment& s : segs) {
    const long long bytes = static_cast<long long>(Rounded(blocks_[s.block].block->size()));
    live[s.first] += bytes;
    live[s.last + 1] -= bytes;
  }
  for (size_t k = 1; k <= n; ++k) live[k] += live[k - 1];
  // b holds its value at p for a rerun of op `by`: placed before p, or
  // recomputed at p by an op recorded before `by` (reruns at one op go in
  // recorded order)
  auto ready_at = [&](size_t b, long p, size_t by) {
    for (size_t s : segs_of[b]) {
      const Segment& sg = segs[s];
      if ((sg.first < p || (sg.first == p && sg.recomputed && sg.writer < by)) && p <= sg.last)
        return true;
    }
    return false;
  };
  auto unchanged = [&](size_t b, long from, long to) {
    for (long w : writes[b])
      if (w > from && w < to) return false;
    return true;
  };
  const double total = std::accumulate(first_seconds_.begin(), first_seconds_.end(), 0.0);
  double left = total * recompute_budget_;
  for (size_t round = 0; round < blocks_.size(); ++round) {
    const long peak = static_cast<long>(std::max_element(live.begin(), live.end() - 1) -
                                        live.begin());
    long best = -1, best_j = 0;
    double best_score = 0;
    for (size_t s = 0; s < segs.size(); ++s) {
      const Segment& seg = segs[s];
      const size_t b = seg.block;
      if (seg.recomputed || segs_of[b].size() > 1 || blocks_[b].writers != 1) continue;
      const std::vector<long>& u = uses[b];
      // u[j] < peak < u[j + 1], with at least one reader before the gap
      const long j = static_cast<long>(std::lower_bound(u.begin(), u.end(), peak) - u.begin()) - 1;
      if (j < 1 || j + 1 >= static_cast<long>(u.size()) || u[j + 1] <= peak) continue;
      const long target = u[j + 1];
      const double cost = first_seconds_[seg.writer];
      if (cost > left) continue;
      const Node& w = nodes_[seg.writer];
      bool ok = true;
      for (size_t r : w.reads) {
        if (r == b || blocks_[r].block->size() == 0 ||
            (blocks_[r].intermediate && !ready_at(r, target, seg.writer)) ||
            !unchanged(r, seg.first, target)) {
          ok = false;
          break;
        }
      }
      for (size_t o : w.writes) {
        if (!ok) break;
        if (o == b) continue;
        ok = blocks_[o].intermediate && blocks_[o].writers == 1 && segs_of[o].size() == 1 &&
             ready_at(o, target, seg.writer);
      }
      if (!ok) continue;
      const double score = static_cast<double>(blocks_[b].block->size()) / (cost + 1e-9);
      if (best < 0 || score > best_score) {
        best = static_cast<long>(s);
        best_j = j;
        best_score = score;
      }
    }
    if (best < 0) break;
    Segment& seg = segs[best];
    const std::vector<long>& u = uses[seg.block];
    const long target = u[best_j + 1];
    Segment later{seg.block, seg.writer, target, seg.last, true};
    seg.last = u[best_j];
    const long long bytes = static_cast<long long>(Rounded(blocks_[seg.block].block->size()));
    for (long p = seg.last + 1; p < target; ++p) live[p] -= bytes;
    left -= first_seconds_[seg.writer];
    // the rerun reads its inputs at target: a use that their own splits
    // must respect
    for (size_t r : nodes_[seg.writer].reads) {
      std::vector<long>& ur = uses[r];
      auto it = std::lower_bound(ur.begin(), ur.end(), target);
      if (it == ur.end() || *it != target) ur.insert(it, target);
    }
    segs_of[seg.block].push_back(segs.size());
    segs.push_back(later);
  }
}

// Offsets, largest first: each lifetime goes to the lowest offset where it
// meets no bytes of a lifetime placed before that overlaps it in time.
void Graph::Offsets(MemoryPlan* plan) {
  std::vector<Segment>& segs = plan->segments;
  std::vector<size_t> order(segs.size());
  std::iota(order.begin(), order.end(), 0);
  auto bytes = [&](size_t s) { return Rounded(blocks_[segs[s].block].block->size()); };
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return bytes(a) > bytes(b); });
  std::vector<size_t> placed;
  std::vector<std::pair<size_t, size_t>> busy;
  for (size_t s : order) {
    busy.clear();
    for (size_t c : placed)
      if (segs[c].first <= segs[s].last && segs[s].first <= segs[c].last)
        busy.emplace_back(segs[c].offset, segs[c].offset + bytes(c));
    std::sort(busy.begin(), busy.end());
    size_t off = 0;
    for (const auto& iv : busy) {
      if (off + bytes(s) <= iv.first) break;
      off = std::max(off, iv.second);
    }
    segs[s].offset = off;
    plan->arena = std::max(plan->arena, off + bytes(s));
    placed.push_back(s);
  }
}

}  // namespace singa
