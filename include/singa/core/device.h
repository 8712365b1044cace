// Devices own memory, run work and hold a random generator. CppCPU runs work
// synchronously on the calling thread (loops inside spread over OpenMP).
#ifndef SINGA_CORE_DEVICE_H_
#define SINGA_CORE_DEVICE_H_

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "singa/core/common.h"

// CUDA handle types, declared here so that this header needs no CUDA headers
// (cudaStream_t, cublasHandle_t and curandGenerator_t point to these).
struct CUstream_st;
struct cublasContext;
struct curandGenerator_st;

namespace singa {

#ifdef USE_CUDA
constexpr bool kUseCuda = true;
#else
constexpr bool kUseCuda = false;
#endif

enum CopyDirection { kHostToHost = 0, kHostToDevice, kDeviceToHost, kDeviceToDevice };

class Graph;

// Byte counts of one device (Device::GetMemStats).
struct MemStats {
  size_t allocated = 0;  // held by live blocks now
  size_t peak = 0;       // most held at once since ResetPeakMemory
  size_t cached = 0;     // freed but kept by the device's allocator for reuse
};

// Per-device state passed to the work run by Exec.
struct Context {
  std::mt19937 random_generator;
  // Stands for the generator's state in the block lists of random ops (it is
  // read and written by each), so a graph keeps their recorded order and a
  // replay draws what eager runs draw. It has no memory.
  std::shared_ptr<Block> random_state = std::make_shared<Block>(0, nullptr);
  // CUDA devices only (src/core/device/cuda_gpu.h), made with the device:
  // its ordinal, its one stream, cuBLAS handle and cuRAND generator, and a
  // scratch buffer that kernels on the stream may use in turn.
  int cuda_ordinal = -1;
  CUstream_st* stream = nullptr;
  cublasContext* cublas_handle = nullptr;
  curandGenerator_st* curand_generator = nullptr;
  void* workspace = nullptr;
  size_t workspace_size = 0;
};

class Device : public std::enable_shared_from_this<Device> {
 public:
  virtual ~Device();

  // A Block of size bytes; its memory is taken on first access.
  std::shared_ptr<Block> NewBlock(size_t size);
  // Memory for a Block, counted in GetMemStats; throws MemoryError naming
  // the size on failure.
  void* AllocBlock(size_t size);
  // Called from ~Block, so it never throws: a device that fails to free
  // loses the memory rather than ending the process.
  void FreeBlock(void* ptr, size_t size) noexcept;

  // Copies nbytes between blocks (either may be host memory when the
  // direction says so), offsets in bytes.
  virtual void CopyDataToFrom(void* dst, const void* src, size_t nbytes,
                              CopyDirection direction) = 0;

  // Runs fn on this device, or records it while a graph is being recorded
  // (EnableGraph). The blocks name everything fn reads and writes: graph
  // mode orders work by them (doc/design.md, "Ops, Exec and closures").
  void Exec(std::function<void(Context*)> fn, const std::vector<Block*>& read_blocks,
            const std::vector<Block*>& write_blocks);
  // Waits for all queued work on this device.
  virtual void Sync() {}
  virtual void SetRandSeed(unsigned seed) { ctx_.random_generator.seed(seed); }

  // ---- graph mode (SINGA's names) ----
  // While enabled, Exec appends work to the graph instead of running it.
  void EnableGraph(bool enable);
  bool graph_enabled() const { return recording_; }
  // Runs the recorded work once: in recorded order when serial, else in an
  // order its dependencies allow. Intermediate blocks get memory at their
  // first writer and give it back after their last reader.
  void RunGraph(bool serial = false);
  // Drops the recorded work (and the blocks only it held).
  void ResetGraph();
  // The id of the graph held (unique per graph, 0 when none), so an owner
  // can tell that the graph it recorded is still the one held.
  uint64_t graph_id() const;
  Graph* graph() { return graph_.get(); }
  // The graph held, shared: a caller may keep several recordings and make
  // one the held graph again with AttachGraph (while not recording).
  std::shared_ptr<Graph> CurrentGraph() const { return graph_; }
  void AttachGraph(std::shared_ptr<Graph> graph);
  // 0: quiet; 1: RunGraph times ops by kind; 2: and op by op.
  void SetVerbosity(int verbosity);
  // Runs not counted in the time profile (warm-up).
  void SetSkipIteration(int skip);
  // The share of a run's time that graph memory planning may spend on
  // recomputing intermediates instead of holding them (default 0.05; 0
  // turns recomputation off).
  void SetRecomputeBudget(double share);
  // The time profile of RunGraph as a table (PrintTimeProfiling prints it).
  std::string TimeProfiling() const;
  void PrintTimeProfiling() const;
  // Throws GraphError naming op while a graph is recorded: a value read on
  // the host mid-step would be the one of the recording run only.
  void CheckHostRead(const char* op) const;

  // ---- memory ----
  MemStats GetMemStats() const;
  void ResetPeakMemory();

  int id() const { return id_; }
  virtual bool is_host() const { return true; }
  virtual std::string lang() const { return "cpp"; }
  // "cpu" for the default CPU device (id -1), "cpu:N" for the others
  // (id -1 - N), "cuda:N" for GPU N (id N).
  virtual std::string name() const;
  Context* context() { return &ctx_; }

 protected:
  // Host ids are negative (-1 the default device), CUDA ids the ordinal.
  explicit Device(int id);
  virtual void* Malloc(size_t size) = 0;
  virtual void Free(void* ptr, size_t size) = 0;
  // Bytes the device's allocator keeps for reuse (0 when it keeps none).
  virtual size_t CachedBytes() const { return 0; }

  int id_;
  Context ctx_;

 private:
  std::atomic<size_t> allocated_{0};
  std::atomic<size_t> peak_{0};
  bool recording_ = false;
  std::shared_ptr<Graph> graph_;
  int verbosity_ = 0;
  int skip_ = 0;
  double recompute_budget_ = 0.05;
};

class CppCPU : public Device {
 public:
  ~CppCPU() override;
  // Each CppCPU made here is a separate device with a fresh id; tensors on
  // two of them may not be mixed in one op.
  CppCPU();
  explicit CppCPU(int id);
  void CopyDataToFrom(void* dst, const void* src, size_t nbytes,
                      CopyDirection direction) override;

 protected:
  void* Malloc(size_t size) override;
  void Free(void* ptr, size_t size) override;
  size_t CachedBytes() const override;

 private:
  // Freed buffers kept for reuse, by rounded size, last freed first: large
  // ones because fresh pages from the OS cost a page fault each, which
  // would dominate streaming ops; from 4 KiB on because the last freed is
  // the one still in cache (device.cc). cached_bytes_ counts both,
  // mid_bytes_ those under the large size.
  mutable std::mutex cache_mutex_;
  std::unordered_map<size_t, std::vector<void*>> cache_;
  size_t cached_bytes_ = 0;
  size_t mid_bytes_ = 0;
  // A kept buffer of `rounded` bytes, or null; `mid` for those under the
  // large size (counted in mid_bytes_ too).
  void* TakeKept(size_t rounded, bool mid);
  // Keeps ptr for reuse unless that would pass the cache's bound (or the
  // mid-size one); false when it was not kept, and the caller frees it.
  bool Keep(void* ptr, size_t rounded, bool mid);
  std::atomic<size_t> next_colour_{0};
};

// The process-wide default device (a CppCPU).
std::shared_ptr<Device> DefaultDevice();

// Threads used by element-wise loops and BLAS: at most the processors
// available; n < 1 or n > 4096 raises ValueError.
void SetNumThreads(int n);
int GetNumThreads();

// CUDA entry points (src/core/device/cuda_gpu.cu); without CUDA they throw
// DeviceError saying so, except GetNumGPUs, which is then 0. CreateCudaGPU
// returns the one device object of that ordinal.
bool HasCuda();
int GetNumGPUs();
std::shared_ptr<Device> CreateCudaGPU(int id);
std::string DeviceQuery(int id);
// (free, total) bytes of the GPU's memory.
std::vector<size_t> GetGPUMemSize(int id);
// Lets cuBLAS use TF32 tensor cores for float32 GEMM on dev (off by
// default, so that results match the CPU's).
void SetAllowTF32(const std::shared_ptr<Device>& dev, bool allow);
bool GetAllowTF32(const std::shared_ptr<Device>& dev);

}  // namespace singa

#endif  // SINGA_CORE_DEVICE_H_
