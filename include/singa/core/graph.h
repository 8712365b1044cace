// Graph mode: the work of a step recorded through Device::Exec and replayed
// from C++ (doc/design.md, "Ops, Exec and closures" and "Blocks and memory").
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
// Memory plan (made on the first run after recording): a block is an
// intermediate when it had no memory when the graph first met it, its first
// use in the graph writes it, and nothing but the recorded ops holds it.
// Every other block (inputs, parameters, optimizer states, outputs Python
// still holds) keeps its memory. Intermediates live in one arena per run:
// each gets an offset such that blocks whose lifetimes (first to last use,
// in the order of the run) overlap never share bytes, so memory is reused
// after a block's last reader, and a run costs one allocation however many
// intermediates it has. A block is placed in the arena at its first writer
// and let go after its last use.
class Graph {
 public:
  using Fn = std::function<void(Context*)>;

  explicit Graph(Device* device) : device_(device) {}

  void AddOp(Fn fn, const std::vector<Block*>& reads, const std::vector<Block*>& writes);
  // Runs every op once: in recorded order when serial, else level by level
  // (an op's level is one more than its deepest dependency's, so the ops of
  // one level are independent; a device with several streams could run a
  // level's ops side by side).
  void Run(Context* ctx, bool serial);

  size_t size() const { return nodes_.size(); }
  // The ops op i waits for, ascending.
  const std::vector<size_t>& dependencies(size_t i) const;
  // The ops by dependency level (the order of a run that is not serial).
  const std::vector<std::vector<size_t>>& levels();
  // Blocks the graph touches, and those a run hands back after last use.
  size_t num_blocks() const { return blocks_.size(); }
  size_t num_intermediates();
  // Bytes of the arena of a serial or level-order run.
  size_t arena_bytes(bool serial);

  void set_verbosity(int verbosity) { verbosity_ = verbosity; }
  void set_skip(int skip) { skip_ = skip; }
  // Time per op (verbosity 2) or per kind of op (verbosity 1) over the runs
  // after the skipped ones.
  std::string Profile() const;

 private:
  struct Node {
    Fn fn;
    std::vector<size_t> blocks;  // indices into blocks_, distinct
    std::vector<size_t> deps;
  };
  struct BlockInfo {
    std::shared_ptr<Block> block;
    bool kept = false;  // had memory, or was read before written, when first met
    long last_writer = -1;
    std::vector<size_t> readers;  // since the last write
    bool intermediate = false;
  };

  // Where a run's intermediates go: the arena's size, each one's offset,
  // and per op the intermediates it places and lets go.
  struct MemoryPlan {
    bool ready = false;
    size_t arena = 0;
    std::vector<size_t> offset;               // per block
    std::vector<std::vector<size_t>> place;   // per op
    std::vector<std::vector<size_t>> drop;    // per op
  };

  size_t Info(Block* b, bool read_first);
  void Plan();
  const MemoryPlan& Memory(bool serial);
  template <typename F>
  void ForEachOp(bool serial, F f) const;

  Device* device_;
  MemoryPlan memory_[2];  // [serial]
  std::vector<Node> nodes_;
  std::vector<BlockInfo> blocks_;
  std::unordered_map<Block*, size_t> index_;
  bool planned_ = false;
  std::vector<std::vector<size_t>> levels_;

  int verbosity_ = 0;
  int skip_ = 0;
  size_t runs_ = 0;
  size_t profiled_runs_ = 0;
  std::vector<double> seconds_;  // per op, summed over profiled runs
};

}  // namespace singa

#endif  // SINGA_CORE_GRAPH_H_
