#include "singa/core/graph.h"

#include <cxxabi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <regex>

namespace singa {

namespace {
std::atomic<uint64_t> next_graph_id{1};
}  // namespace

Graph::Graph(Device* device) : device_(device), id_(next_graph_id++) {}

size_t Graph::Info(Block* b, bool read_first) {
  auto it = index_.find(b);
  if (it != index_.end()) return it->second;
  BlockInfo info;
  info.block = b->shared_from_this();
  info.kept = b->allocated() || read_first;
  blocks_.push_back(std::move(info));
  index_.emplace(b, blocks_.size() - 1);
  return blocks_.size() - 1;
}

void Graph::AddOp(Fn fn, const std::vector<Block*>& reads, const std::vector<Block*>& writes) {
  const size_t id = nodes_.size();
  Node node;
  node.fn = std::move(fn);
  std::vector<size_t> deps;
  std::vector<size_t> read_ids, write_ids;
  for (Block* b : reads)
    if (b) read_ids.push_back(Info(b, true));
  for (Block* b : writes)
    if (b) write_ids.push_back(Info(b, false));
  auto dedup = [](std::vector<size_t>* v) {
    std::sort(v->begin(), v->end());
    v->erase(std::unique(v->begin(), v->end()), v->end());
  };
  dedup(&read_ids);
  dedup(&write_ids);
  for (size_t r : read_ids) {
    BlockInfo& info = blocks_[r];
    if (info.last_writer >= 0) deps.push_back(static_cast<size_t>(info.last_writer));
  }
  for (size_t w : write_ids) {
    BlockInfo& info = blocks_[w];
    if (info.last_writer >= 0) deps.push_back(static_cast<size_t>(info.last_writer));
    deps.insert(deps.end(), info.readers.begin(), info.readers.end());
    info.readers.clear();
    info.last_writer = static_cast<long>(id);
  }
  for (size_t r : read_ids) {
    BlockInfo& info = blocks_[r];
    if (info.last_writer != static_cast<long>(id)) info.readers.push_back(id);
  }
  dedup(&deps);
  node.deps = std::move(deps);
  for (size_t w : write_ids) ++blocks_[w].writers;
  node.blocks = read_ids;
  node.blocks.insert(node.blocks.end(), write_ids.begin(), write_ids.end());
  dedup(&node.blocks);
  node.reads = std::move(read_ids);
  node.writes = std::move(write_ids);
  nodes_.push_back(std::move(node));
  planned_ = false;
}

const std::vector<size_t>& Graph::dependencies(size_t i) const {
  SINGA_CHECK(i < nodes_.size(), IndexError, "graph: op ", i, " is out of range for ",
              nodes_.size(), " ops");
  return nodes_[i].deps;
}

void Graph::Plan() {
  // References the recorded closures hold, per block: copying a closure
  // copies the Tensors it captured, which shows how many it holds.
  std::vector<long> in_closures(blocks_.size(), 0);
  std::vector<long> before;
  for (const Node& node : nodes_) {
    before.clear();
    for (size_t b : node.blocks) before.push_back(blocks_[b].block.use_count());
    Fn copy = node.fn;
    for (size_t k = 0; k < node.blocks.size(); ++k) {
      const size_t b = node.blocks[k];
      in_closures[b] += blocks_[b].block.use_count() - before[k];
    }
  }
  for (size_t b = 0; b < blocks_.size(); ++b) {
    BlockInfo& info = blocks_[b];
    const long outside = info.block.use_count() - 1 - in_closures[b];
    info.intermediate = !info.kept && outside == 0;
  }
  // Demand order: the ops that nothing waits for (updates, outputs) in
  // recorded order, each preceded by what it needs that has not run yet,
  // the latest recorded dependency first. An op thus runs just before the
  // first op that needs it: a value needed late (a mask for backward) is
  // not made early and held.
  std::vector<bool> needed(nodes_.size(), false), emitted(nodes_.size(), false);
  for (const Node& node : nodes_)
    for (size_t d : node.deps) needed[d] = true;
  demand_.clear();
  std::vector<std::pair<size_t, size_t>> stack;  // (op, next dependency)
  for (size_t root = 0; root < nodes_.size(); ++root) {
    if (needed[root] || emitted[root]) continue;
    stack.emplace_back(root, 0);
    while (!stack.empty()) {
      auto& [op, next] = stack.back();
      const std::vector<size_t>& deps = nodes_[op].deps;  // ascending
      while (next < deps.size() && emitted[deps[deps.size() - 1 - next]]) ++next;
      if (next < deps.size()) {
        const size_t d = deps[deps.size() - 1 - next++];
        stack.emplace_back(d, 0);
        continue;
      }
      if (!emitted[op]) {
        emitted[op] = true;
        demand_.push_back(op);
      }
      stack.pop_back();
    }
  }
  seconds_.assign(nodes_.size(), 0.0);
  profiled_runs_ = 0;
  runs_ = 0;
  memory_[0] = MemoryPlan();
  memory_[1] = MemoryPlan();
  planned_ = true;
}

const std::vector<size_t>& Graph::demand_order() {
  if (!planned_) Plan();
  return demand_;
}

size_t Graph::num_intermediates() {
  if (!planned_) Plan();
  size_t n = 0;
  for (const BlockInfo& info : blocks_) n += info.intermediate;
  return n;
}

void Graph::Run(Context* ctx, bool serial) {
  if (!planned_) Plan();
  const MemoryPlan& plan = Memory(serial);
  char* arena = plan.arena ? static_cast<char*>(device_->AllocBlock(plan.arena)) : nullptr;
  // The first runs are timed for the memory plan (the first alone would
  // charge each op for touching fresh arena pages).
  const bool first = runs_ < kTimedRuns;
  const bool timed = first || (verbosity_ > 0 && runs_ >= static_cast<size_t>(skip_));
  if (runs_ == 0) first_seconds_.assign(nodes_.size(), 1e30);
  auto place = [&](size_t seg) {
    const Segment& s = plan.segments[seg];
    blocks_[s.block].block->Place(arena + s.offset);
  };
  auto run = [&](size_t i) {
    for (size_t seg : plan.recompute[i]) {
      place(seg);
      nodes_[plan.segments[seg].writer].fn(ctx);
    }
    for (size_t seg : plan.place[i]) place(seg);
    Node& node = nodes_[i];
    if (timed) {
      // Sync: on an asynchronous device the time of an op is that of its
      // work, not of queuing it (a no-op on the CPU).
      auto t0 = std::chrono::steady_clock::now();
      node.fn(ctx);
      device_->Sync();
      const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (first) first_seconds_[i] = std::min(first_seconds_[i], dt);
      if (verbosity_ > 0 && runs_ >= static_cast<size_t>(skip_)) seconds_[i] += dt;
    } else {
      node.fn(ctx);
    }
    for (size_t seg : plan.drop[i]) blocks_[plan.segments[seg].block].block->Release();
  };
  try {
    ForEachOp(serial, run);
  } catch (...) {
    // Nothing may keep pointing into the arena once it is gone.
    for (BlockInfo& info : blocks_)
      if (info.intermediate) info.block->Release();
    if (arena) device_->FreeBlock(arena, plan.arena);
    throw;
  }
  if (arena) device_->FreeBlock(arena, plan.arena);
  if (verbosity_ > 0 && runs_ >= static_cast<size_t>(skip_)) ++profiled_runs_;
  ++runs_;
}

namespace {
// A short name for the kind of op a closure belongs to, from its type:
// "UnaryInto<Exp>", "Mult", "Conv2dForward".
std::string OpKind(const Graph::Fn& fn) {
  const char* mangled = fn.target_type().name();
  int status = 0;
  char* raw = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string name = status == 0 && raw ? raw : mangled;
  std::free(raw);
  name = std::regex_replace(name, std::regex(R"(\(anonymous namespace\)::)"), "");
  name = std::regex_replace(name, std::regex(R"(singa::(op::)?)"), "");
  // The functions the closure was made in, innermost last; wrappers such as
  // RunKernel take the kernel's function as a template argument.
  static const std::regex fn_re(R"(([A-Za-z_]\w*(?:::[A-Za-z_]\w*)?)(<[\w:, ]*>)?\()");
  std::string best;
  for (std::sregex_iterator it(name.begin(), name.end(), fn_re), end; it != end; ++it) {
    std::string f = (*it)[1].str();
    if (f == "RunKernel" || f == "lambda" || f.find("std::") == 0) continue;
    best = f + (*it)[2].str();
  }
  return best.empty() ? name : best;
}
}  // namespace

std::string Graph::Profile() const {
  std::string out;
  char line[256];
  if (profiled_runs_ == 0 || seconds_.size() != nodes_.size()) {
    std::snprintf(line, sizeof(line),
                  "graph: %zu ops; no timed runs (set verbosity > 0; %d skipped of %zu run)\n",
                  nodes_.size(), skip_, runs_);
    return line;
  }
  double total = 0;
  for (double s : seconds_) total += s;
  const double runs = static_cast<double>(profiled_runs_);
  std::snprintf(line, sizeof(line), "graph: %zu ops, %zu timed runs, %.3f ms per run\n",
                nodes_.size(), profiled_runs_, total / runs * 1e3);
  out += line;
  if (verbosity_ >= 2) {
    std::snprintf(line, sizeof(line), "%6s  %-40s %12s %7s\n", "op", "kind", "us per run", "%");
    out += line;
    for (size_t i = 0; i < nodes_.size(); ++i) {
      std::snprintf(line, sizeof(line), "%6zu  %-40.40s %12.2f %6.1f%%\n", i,
                    OpKind(nodes_[i].fn).c_str(), seconds_[i] / runs * 1e6,
                    total > 0 ? 100.0 * seconds_[i] / total : 0.0);
      out += line;
    }
    return out;
  }
  std::map<std::string, std::pair<size_t, double>> kinds;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    auto& k = kinds[OpKind(nodes_[i].fn)];
    ++k.first;
    k.second += seconds_[i];
  }
  std::vector<std::pair<std::string, std::pair<size_t, double>>> rows(kinds.begin(),
                                                                      kinds.end());
  std::sort(rows.begin(), rows.end(),
            [](const auto& a, const auto& b) { return a.second.second > b.second.second; });
  std::snprintf(line, sizeof(line), "%-40s %6s %12s %7s\n", "kind", "ops", "us per run", "%");
  out += line;
  for (const auto& r : rows) {
    std::snprintf(line, sizeof(line), "%-40.40s %6zu %12.2f %6.1f%%\n", r.first.c_str(),
                  r.second.first, r.second.second / runs * 1e6,
                  total > 0 ? 100.0 * r.second.second / total : 0.0);
    out += line;
  }
  return out;
}

}  // namespace singa
