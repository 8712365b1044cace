// Graph mode: the work of a step recorded through Device::Exec and replayed
// from C++ (doc/graph.md; doc/design.md, "Ops, Exec and closures" and
// "Blocks and memory").
#ifndef SINGA_CORE_GRAPH_H_
#define SINGA_CORE_GRAPH_H_

#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "singa/core/common.h"
#include "singa/core/device.h"

namespace singa {

// Recorded ops and the blocks they touch. An op depends on the last writer
// of every block it reads or writes and on the readers of every block it
// overwrites since that block's last write, so any order that runs each op
// after its dependencies computes what the recorded order computes.
//
// Memory plan (graph_memory.cc), made for the order of a run: a block is an
// intermediate when it had no memory when the graph first met it, its first
// use in the graph writes it, and nothing but the recorded ops holds it.
// Every other block (inputs, parameters, optimizer states, outputs Python
// still holds) keeps its memory. Intermediates live in one arena per run:
// each lifetime (first to last use) gets an offset such that lifetimes that
// overlap never share bytes, so memory is reused after a block's last
// reader and a run costs one allocation. Once the first runs have been
// timed, the plan may also recompute a cheap intermediate (an op that wrote only
// intermediates, from inputs still held and unchanged) right before a late
// reader instead of holding it across the peak, spending at most a set
// share of the measured run time on it.
class Graph {
 public:
  using Fn = std::function<void(Context*)>;

  explicit Graph(Device* device);

  uint64_t id() const { return id_; }
  Device* device() const { return device_; }

  void AddOp(Fn fn, const std::vector<Block*>& reads, const std::vector<Block*>& writes);
  // Runs every op once: in recorded order when serial, else in demand
  // order (Plan). Both respect the dependencies, which is all a run needs:
  // a device with several streams could run ops side by side once what
  // they wait for is done.
  void Run(Context* ctx, bool serial);

  size_t size() const { return nodes_.size(); }
  // The ops op i waits for, ascending.
  const std::vector<size_t>& dependencies(size_t i) const;
  // The order of a run that is not serial.
  const std::vector<size_t>& demand_order();
  // Blocks the graph touches, and those a run hands back after last use.
  size_t num_blocks() const { return blocks_.size(); }
  size_t num_intermediates();
  // Bytes of the arena of a serial or demand-order run, and the ops it
  // reruns to save memory (as planned for the next run).
  size_t arena_bytes(bool serial);
  size_t num_recomputed(bool serial);

  void set_verbosity(int verbosity) { verbosity_ = verbosity; }
  void set_skip(int skip) { skip_ = skip; }
  // The share of a run's time that recomputation may add (0 turns it off).
  void set_recompute_budget(double share);
  // Time per op (verbosity 2) or per kind of op (verbosity 1) over the runs
  // after the skipped ones.
  std::string Profile() const;

 private:
  struct Node {
    Fn fn;
    std::vector<size_t> reads, writes;  // indices into blocks_, distinct
    std::vector<size_t> blocks;         // reads and writes
    std::vector<size_t> deps;
  };
  struct BlockInfo {
    std::shared_ptr<Block> block;
    bool kept = false;  // had memory, or was read before written, when first met
    long last_writer = -1;
    std::vector<size_t> readers;  // since the last write
    size_t writers = 0;           // ops that write it
    bool intermediate = false;
  };
  // A stretch of an intermediate's life in the arena, between the op that
  // places it (its writer, or a rerun of its writer before `first`) and
  // the op after which it is let go, as positions in the run's order.
  struct Segment {
    size_t block;
    size_t writer;  // the op that writes it (rerun when recomputed)
    long first, last;
    bool recomputed;
    size_t offset = 0;
  };
  struct MemoryPlan {
    bool ready = false;
    bool with_timings = false;
    size_t arena = 0;
    std::vector<Segment> segments;
    // per op: segments placed before it runs, segments whose writer reruns
    // before it, segments let go after it
    std::vector<std::vector<size_t>> place, recompute, drop;
  };

  size_t Info(Block* b, bool read_first);
  void Plan();
  const MemoryPlan& Memory(bool serial);
  void Recompute(const std::vector<size_t>& at, MemoryPlan* plan);
  void Offsets(MemoryPlan* plan);
  template <typename F>
  void ForEachOp(bool serial, F f) const;

  Device* device_;
  uint64_t id_;
  MemoryPlan memory_[2];  // [serial]
  double recompute_budget_ = 0.05;
  std::vector<Node> nodes_;
  std::vector<BlockInfo> blocks_;
  std::unordered_map<Block*, size_t> index_;
  bool planned_ = false;
  std::vector<size_t> demand_;

  int verbosity_ = 0;
  int skip_ = 0;
  size_t runs_ = 0;
  size_t profiled_runs_ = 0;
  std::vector<double> seconds_;        // per op, summed over profiled runs
  static constexpr size_t kTimedRuns = 2;
  std::vector<double> first_seconds_;  // per op, the least over the first runs
};

template <typename F>
void Graph::ForEachOp(bool serial, F f) const {
  if (serial) {
    for (size_t i = 0; i < nodes_.size(); ++i) f(i);
  } else {
    for (size_t i : demand_) f(i);
  }
}

}  // namespace singa

#endif  // SINGA_CORE_GRAPH_H_
