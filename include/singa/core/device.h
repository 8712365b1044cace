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

// Per-device state passed to the work run by Exec.
struct Context {
  std::mt19937 random_generator;
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
  virtual ~Device() = default;

  // Allocates size bytes; throws MemoryError naming the size on failure.
  std::shared_ptr<Block> NewBlock(size_t size);
  // Called from ~Block, so it never throws: a device that fails to free
  // loses the memory rather than ending the process.
  void FreeBlock(void* ptr, size_t size) noexcept {
    try {
      Free(ptr, size);
    } catch (...) {
    }
  }

  // Copies nbytes between blocks (either may be host memory when the
  // direction says so), offsets in bytes.
  virtual void CopyDataToFrom(void* dst, const void* src, size_t nbytes,
                              CopyDirection direction) = 0;

  // Runs fn on this device. The blocks name what fn reads and writes so an
  // asynchronous device can order work; CppCPU runs fn at once.
  virtual void Exec(const std::function<void(Context*)>& fn,
                    const std::vector<Block*>& read_blocks,
                    const std::vector<Block*>& write_blocks);
  // Waits for all queued work on this device.
  virtual void Sync() {}
  virtual void SetRandSeed(unsigned seed) { ctx_.random_generator.seed(seed); }

  int id() const { return id_; }
  virtual bool is_host() const { return true; }
  virtual std::string lang() const { return "cpp"; }
  // "cpu" for the default CPU device (id -1), "cpu:N" for the others
  // (id -1 - N), "cuda:N" for GPU N (id N).
  virtual std::string name() const;
  Context* context() { return &ctx_; }

 protected:
  // Host ids are negative (-1 the default device), CUDA ids the ordinal.
  explicit Device(int id) : id_(id) {
    ctx_.random_generator.seed(static_cast<unsigned>(id < 0 ? -id : id + 1));
  }
  virtual void* Malloc(size_t size) = 0;
  virtual void Free(void* ptr, size_t size) = 0;

  int id_;
  Context ctx_;
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

 private:
  // Freed large buffers kept for reuse, by rounded size: fresh pages from
  // the OS cost a page fault each, which would dominate streaming ops.
  std::mutex cache_mutex_;
  std::unordered_map<size_t, std::vector<void*>> cache_;
  size_t cached_bytes_ = 0;
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
