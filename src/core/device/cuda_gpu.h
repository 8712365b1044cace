// CudaGPU: one CUDA device with one stream, a cuBLAS handle and a cuRAND
// generator (in its Context), and a caching allocator over cudaMalloc.
// Internal to the .cu files; device.h declares the public entry points.
//
// Every CUDA, cuBLAS and cuRAND call is checked: a failure throws CudaError
// (RuntimeError in Python) naming the call and the library's error string;
// running out of memory throws MemoryError naming the bytes asked for and
// free. Work is queued on the stream and never waited for, except where the
// host reads device memory (Sync, copies to the host).
#ifndef SINGA_SRC_CORE_DEVICE_CUDA_GPU_H_
#define SINGA_SRC_CORE_DEVICE_CUDA_GPU_H_

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <curand.h>

#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "singa/core/device.h"

namespace singa {
namespace cuda {

[[noreturn]] void ThrowCudaError(const char* call, cudaError_t err);
[[noreturn]] void ThrowCublasError(const char* call, cublasStatus_t status);
[[noreturn]] void ThrowCurandError(const char* call, curandStatus_t status);

}  // namespace cuda
}  // namespace singa

#define SINGA_CUDA_CHECK(call)                                            \
  do {                                                                    \
    const cudaError_t singa_err_ = (call);                                \
    if (singa_err_ != cudaSuccess) ::singa::cuda::ThrowCudaError(#call, singa_err_); \
  } while (0)
#define SINGA_CUBLAS_CHECK(call)                                           \
  do {                                                                     \
    const cublasStatus_t singa_st_ = (call);                               \
    if (singa_st_ != CUBLAS_STATUS_SUCCESS)                                \
      ::singa::cuda::ThrowCublasError(#call, singa_st_);                   \
  } while (0)
#define SINGA_CURAND_CHECK(call)                                           \
  do {                                                                     \
    const curandStatus_t singa_st_ = (call);                               \
    if (singa_st_ != CURAND_STATUS_SUCCESS)                                \
      ::singa::cuda::ThrowCurandError(#call, singa_st_);                   \
  } while (0)
// After a kernel launch: reports a bad launch configuration at once, and an
// earlier asynchronous failure at the first launch after it, naming the
// kernel.
#define SINGA_CUDA_LAUNCHED(kernel)                                             \
  do {                                                                          \
    const cudaError_t singa_err_ = cudaGetLastError();                          \
    if (singa_err_ != cudaSuccess)                                              \
      ::singa::cuda::ThrowCudaError("launch of " #kernel " (or earlier work)", singa_err_); \
  } while (0)

namespace singa {

class CudaGPU : public Device {
 public:
  explicit CudaGPU(int ordinal);
  ~CudaGPU() override;

  void CopyDataToFrom(void* dst, const void* src, size_t nbytes,
                      CopyDirection direction) override;
  void Sync() override;
  void SetRandSeed(unsigned seed) override;
  bool is_host() const override { return false; }
  std::string lang() const override { return "cuda"; }
  std::string name() const override { return "cuda:" + std::to_string(id_); }

  // Bytes held by the cache for reuse (the "cached" of GetMemStats).
  size_t CachedBytes() const override;
  // Returns cached memory to CUDA (after the stream's queued work is done).
  void EmptyCache();
  void SetAllowTF32(bool allow);
  bool allow_tf32() const { return allow_tf32_; }

 protected:
  // Device memory from the cache (Blocks and kernels' scratch space, both
  // through AllocBlock/FreeBlock so that GetMemStats counts them); freed
  // memory may be reused by work queued after the free.
  void* Malloc(size_t size) override;
  void Free(void* ptr, size_t size) override;

 private:
  void EmptyCacheLocked();

  mutable std::mutex mutex_;
  // Freed allocations by rounded size. One stream orders all work on the
  // device, so a freed allocation can be handed out again at once.
  std::unordered_map<size_t, std::vector<void*>> cache_;
  size_t cached_bytes_ = 0;
  bool allow_tf32_ = false;
};

namespace cuda {

// The CudaGPU of this ordinal (made on first use).
std::shared_ptr<CudaGPU> GetDevice(int ordinal);
// Makes the context's GPU current on this thread and returns its stream.
cudaStream_t Stream(Context* ctx);
// Scratch memory of at least bytes on the context's GPU. It stays valid for
// the work queued on the stream until the next Workspace call on the same
// context, so one kernel sequence may use it while no other asks for it.
void* Workspace(Context* ctx, size_t bytes);
// Blocks of threads for n independent items (at least one block).
inline unsigned Blocks(int64_t n, int threads) {
  int64_t b = (n + threads - 1) / threads;
  if (b < 1) b = 1;
  // Grid-stride loops cover the rest beyond this many blocks.
  return static_cast<unsigned>(b < (int64_t(1) << 20) ? b : (int64_t(1) << 20));
}

}  // namespace cuda
}  // namespace singa

#endif  // SINGA_SRC_CORE_DEVICE_CUDA_GPU_H_
