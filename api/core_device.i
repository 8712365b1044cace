// Devices: the default CPU device, extra CPU devices, and the CUDA entry
// points (which raise RuntimeError in a build without CUDA).
%shared_ptr(singa::Device)
%shared_ptr(singa::CppCPU)
%shared_ptr(singa::Graph)

namespace singa {

// A recorded graph, kept aside by its owner (Device.CurrentGraph) and held
// again with Device.AttachGraph.
class Graph {
 public:
  uint64_t id() const;
  size_t size() const;
 private:
  Graph();
};

struct MemStats {
  size_t allocated;
  size_t peak;
  size_t cached;
};

class Device {
 public:
  virtual void Sync();
  virtual void SetRandSeed(unsigned seed);

  void EnableGraph(bool enable);
  bool graph_enabled() const;
  void RunGraph(bool serial = false);
  void ResetGraph();
  uint64_t graph_id() const;
  std::shared_ptr<Graph> CurrentGraph() const;
  void AttachGraph(std::shared_ptr<Graph> graph);
  void SetVerbosity(int verbosity);
  void SetSkipIteration(int skip);
  void SetRecomputeBudget(double share);
  std::string TimeProfiling() const;
  void PrintTimeProfiling() const;
  MemStats GetMemStats() const;
  void ResetPeakMemory();

  int id() const;
  virtual bool is_host() const;
  virtual std::string lang() const;
  virtual std::string name() const;
 protected:
  Device(int id);
};

class CppCPU : public Device {
 public:
  CppCPU();
};

%extend Device {
  // Ops in the recorded graph, and the ops op i waits for (for tests and
  // tools that inspect a recording).
  size_t graph_size() { return $self->graph() ? $self->graph()->size() : 0; }
  std::vector<size_t> graph_dependencies(size_t i) {
    SINGA_CHECK($self->graph(), ValueError, "graph_dependencies: ", $self->name(),
                " has no recorded graph");
    return $self->graph()->dependencies(i);
  }
  // {"allocated": bytes held by live blocks, "peak": most held at once
  // since reset_peak_memory(), "cached": freed bytes the device's
  // allocator keeps for reuse}.
  PyObject* memory_stats() {
    singa::MemStats s = $self->GetMemStats();
    return Py_BuildValue("{s:K,s:K,s:K}", "allocated", (unsigned long long)s.allocated,
                         "peak", (unsigned long long)s.peak, "cached",
                         (unsigned long long)s.cached);
  }
  void reset_peak_memory() { $self->ResetPeakMemory(); }
  // Blocks the graph touches, and those each run hands back after last use.
  std::vector<size_t> graph_block_counts() {
    if (!$self->graph()) return {0, 0};
    return {$self->graph()->num_blocks(), $self->graph()->num_intermediates()};
  }
  // The order of the ops in a run.
  std::vector<size_t> graph_run_order(bool serial = false) {
    if (!$self->graph()) return {};
    if (serial) {
      std::vector<size_t> order($self->graph()->size());
      for (size_t i = 0; i < order.size(); ++i) order[i] = i;
      return order;
    }
    return $self->graph()->demand_order();
  }
  // Bytes of the arena that holds a run's intermediates, and the ops the
  // next run reruns to save memory.
  size_t graph_arena_bytes(bool serial = false) {
    return $self->graph() ? $self->graph()->arena_bytes(serial) : 0;
  }
  size_t graph_recomputed(bool serial = false) {
    return $self->graph() ? $self->graph()->num_recomputed(serial) : 0;
  }
}

std::shared_ptr<Device> DefaultDevice();
void SetNumThreads(int n);
int GetNumThreads();
bool HasCuda();
int GetNumGPUs();
std::shared_ptr<Device> CreateCudaGPU(int id);
std::string DeviceQuery(int id);
std::vector<size_t> GetGPUMemSize(int id);
void SetAllowTF32(const std::shared_ptr<Device>& dev, bool allow);
bool GetAllowTF32(const std::shared_ptr<Device>& dev);

}  // namespace singa
