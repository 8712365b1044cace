// CudaGPU and the CUDA entry points of device.h.
#include "device/cuda_gpu.h"

#include <algorithm>
#include <cstring>
#include <sstream>

namespace singa {
namespace cuda {

void ThrowCudaError(const char* call, cudaError_t err) {
  // Clear the error so that it is not reported again by the next check
  // (sticky errors, such as a kernel's illegal address, stay anyway).
  cudaGetLastError();
  if (err == cudaErrorMemoryAllocation)
    SINGA_THROW(MemoryError, call, " failed: ", cudaGetErrorString(err));
  SINGA_THROW(CudaError, call, " failed: ", cudaGetErrorName(err), ": ",
              cudaGetErrorString(err));
}

void ThrowCublasError(const char* call, cublasStatus_t status) {
  if (status == CUBLAS_STATUS_ALLOC_FAILED)
    SINGA_THROW(MemoryError, call, " failed: ", cublasGetStatusString(status));
  SINGA_THROW(CudaError, call, " failed: ", cublasGetStatusName(status), ": ",
              cublasGetStatusString(status));
}

namespace {
const char* CurandStatusName(curandStatus_t status) {
  switch (status) {
    case CURAND_STATUS_VERSION_MISMATCH:
      return "CURAND_STATUS_VERSION_MISMATCH: header and library versions differ";
    case CURAND_STATUS_NOT_INITIALIZED:
      return "CURAND_STATUS_NOT_INITIALIZED: generator not initialised";
    case CURAND_STATUS_ALLOCATION_FAILED:
      return "CURAND_STATUS_ALLOCATION_FAILED: memory allocation failed";
    case CURAND_STATUS_TYPE_ERROR:
      return "CURAND_STATUS_TYPE_ERROR: wrong generator type";
    case CURAND_STATUS_OUT_OF_RANGE:
      return "CURAND_STATUS_OUT_OF_RANGE: argument out of range";
    case CURAND_STATUS_LENGTH_NOT_MULTIPLE:
      return "CURAND_STATUS_LENGTH_NOT_MULTIPLE: length not a multiple of the dimension";
    case CURAND_STATUS_DOUBLE_PRECISION_REQUIRED:
      return "CURAND_STATUS_DOUBLE_PRECISION_REQUIRED: GPU lacks double precision";
    case CURAND_STATUS_LAUNCH_FAILURE:
      return "CURAND_STATUS_LAUNCH_FAILURE: kernel launch failure";
    case CURAND_STATUS_PREEXISTING_FAILURE:
      return "CURAND_STATUS_PREEXISTING_FAILURE: an earlier failure was not cleared";
    case CURAND_STATUS_INITIALIZATION_FAILED:
      return "CURAND_STATUS_INITIALIZATION_FAILED: initialisation of CUDA failed";
    case CURAND_STATUS_ARCH_MISMATCH:
      return "CURAND_STATUS_ARCH_MISMATCH: architecture mismatch";
    case CURAND_STATUS_INTERNAL_ERROR:
      return "CURAND_STATUS_INTERNAL_ERROR: internal library error";
    default:
      return "unknown cuRAND status";
  }
}
}  // namespace

void ThrowCurandError(const char* call, curandStatus_t status) {
  if (status == CURAND_STATUS_ALLOCATION_FAILED)
    SINGA_THROW(MemoryError, call, " failed: ", CurandStatusName(status));
  SINGA_THROW(CudaError, call, " failed: ", CurandStatusName(status), " (status ",
              static_cast<int>(status), ")");
}

cudaStream_t Stream(Context* ctx) {
  SINGA_CUDA_CHECK(cudaSetDevice(ctx->cuda_ordinal));
  return ctx->stream;
}

void* Workspace(Context* ctx, size_t bytes) {
  if (bytes <= ctx->workspace_size) return ctx->workspace;
  auto gpu = GetDevice(ctx->cuda_ordinal);
  // Grow by at least half, so that a slowly rising demand reallocates
  // rarely. The old buffer goes back to the cache: work already queued on
  // the stream finishes with it before anything queued later reuses it.
  // AllocBlock/FreeBlock count the buffer in the device's memory stats.
  size_t want = std::max(bytes, ctx->workspace_size + ctx->workspace_size / 2);
  void* fresh = gpu->AllocBlock(want);
  if (ctx->workspace) gpu->FreeBlock(ctx->workspace, ctx->workspace_size);
  ctx->workspace = fresh;
  ctx->workspace_size = want;
  return fresh;
}

}  // namespace cuda

namespace {

// Allocation sizes are rounded so that the same requests map to the same
// cached blocks: to 512 bytes up to 1 MiB, then to an eighth of the power
// of two below the size (at most 12.5% unused).
size_t RoundSize(size_t n) {
  if (n <= (size_t(1) << 20)) return (n + 511) / 512 * 512;
  size_t p = size_t(1) << 20;
  while (p <= n / 2) p <<= 1;
  const size_t step = p / 8;
  return (n + step - 1) / step * step;
}

std::string FreeMemoryNote(int ordinal) {
  size_t free_b = 0, total_b = 0;
  if (cudaSetDevice(ordinal) != cudaSuccess || cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) {
    cudaGetLastError();
    return "free memory unknown";
  }
  return detail::Concat(free_b, " bytes free of ", total_b);
}

}  // namespace

CudaGPU::CudaGPU(int ordinal) : Device(ordinal) {
  ctx_.cuda_ordinal = ordinal;
  SINGA_CUDA_CHECK(cudaSetDevice(ordinal));
  cudaStream_t stream = nullptr;
  SINGA_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  ctx_.stream = stream;
  cublasHandle_t handle = nullptr;
  SINGA_CUBLAS_CHECK(cublasCreate(&handle));
  ctx_.cublas_handle = handle;
  SINGA_CUBLAS_CHECK(cublasSetStream(handle, stream));
  // Full float32 precision unless TF32 is asked for (SetAllowTF32).
  SINGA_CUBLAS_CHECK(cublasSetMathMode(handle, CUBLAS_DEFAULT_MATH));
  curandGenerator_t gen = nullptr;
  SINGA_CURAND_CHECK(curandCreateGenerator(&gen, CURAND_RNG_PSEUDO_PHILOX4_32_10));
  ctx_.curand_generator = gen;
  SINGA_CURAND_CHECK(curandSetStream(gen, stream));
  SetRandSeed(static_cast<unsigned>(ordinal + 1));
}

CudaGPU::~CudaGPU() {
  // Errors are ignored here: a destructor must not throw, and at process
  // exit the CUDA runtime may already be gone.
  cudaSetDevice(ctx_.cuda_ordinal);
  if (ctx_.stream) cudaStreamSynchronize(ctx_.stream);
  if (ctx_.workspace) cudaFree(ctx_.workspace);
  for (auto& kv : cache_)
    for (void* p : kv.second) cudaFree(p);
  if (ctx_.curand_generator) curandDestroyGenerator(ctx_.curand_generator);
  if (ctx_.cublas_handle) cublasDestroy(ctx_.cublas_handle);
  if (ctx_.stream) cudaStreamDestroy(ctx_.stream);
  cudaGetLastError();
}

void* CudaGPU::Malloc(size_t size) {
  if (size == 0) return nullptr;
  const size_t rounded = RoundSize(size);
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = cache_.find(rounded);
  if (it != cache_.end() && !it->second.empty()) {
    void* p = it->second.back();
    it->second.pop_back();
    cached_bytes_ -= rounded;
    return p;
  }
  SINGA_CUDA_CHECK(cudaSetDevice(ctx_.cuda_ordinal));
  void* p = nullptr;
  cudaError_t err = cudaMalloc(&p, rounded);
  if (err == cudaErrorMemoryAllocation && cached_bytes_ > 0) {
    cudaGetLastError();
    EmptyCacheLocked();
    err = cudaMalloc(&p, rounded);
  }
  if (err == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    SINGA_THROW(MemoryError, "cannot allocate ", size, " bytes on ", name(), " (",
                FreeMemoryNote(ctx_.cuda_ordinal), ")");
  }
  if (err != cudaSuccess) cuda::ThrowCudaError("cudaMalloc", err);
  return p;
}

void CudaGPU::Free(void* ptr, size_t size) {
  if (!ptr) return;
  const size_t rounded = RoundSize(size);
  std::lock_guard<std::mutex> lock(mutex_);
  cache_[rounded].push_back(ptr);
  cached_bytes_ += rounded;
}

size_t CudaGPU::CachedBytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return cached_bytes_;
}

void CudaGPU::EmptyCache() {
  std::lock_guard<std::mutex> lock(mutex_);
  EmptyCacheLocked();
}

void CudaGPU::EmptyCacheLocked() {
  // Queued work may still use memory that was freed into the cache.
  SINGA_CUDA_CHECK(cudaSetDevice(ctx_.cuda_ordinal));
  SINGA_CUDA_CHECK(cudaStreamSynchronize(ctx_.stream));
  for (auto& kv : cache_)
    for (void* p : kv.second) SINGA_CUDA_CHECK(cudaFree(p));
  cache_.clear();
  cached_bytes_ = 0;
}

void CudaGPU::CopyDataToFrom(void* dst, const void* src, size_t nbytes,
                             CopyDirection direction) {
  if (nbytes == 0) return;
  cudaStream_t stream = cuda::Stream(&ctx_);
  switch (direction) {
    case kHostToHost:
      std::memcpy(dst, src, nbytes);
      return;
    case kHostToDevice:
      SINGA_CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyHostToDevice, stream));
      // The caller may reuse its host buffer once this returns, also when
      // the buffer is pinned (then the copy would otherwise still run).
      SINGA_CUDA_CHECK(cudaStreamSynchronize(stream));
      return;
    case kDeviceToHost:
      SINGA_CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDeviceToHost, stream));
      SINGA_CUDA_CHECK(cudaStreamSynchronize(stream));
      return;
    case kDeviceToDevice:
      SINGA_CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDeviceToDevice, stream));
      return;
  }
}

void CudaGPU::Sync() { SINGA_CUDA_CHECK(cudaStreamSynchronize(cuda::Stream(&ctx_))); }

void CudaGPU::SetRandSeed(unsigned seed) {
  Device::SetRandSeed(seed);
  SINGA_CUDA_CHECK(cudaSetDevice(ctx_.cuda_ordinal));
  SINGA_CURAND_CHECK(curandSetPseudoRandomGeneratorSeed(ctx_.curand_generator, seed));
  SINGA_CURAND_CHECK(curandSetGeneratorOffset(ctx_.curand_generator, 0));
}

void CudaGPU::SetAllowTF32(bool allow) {
  SINGA_CUDA_CHECK(cudaSetDevice(ctx_.cuda_ordinal));
  SINGA_CUBLAS_CHECK(cublasSetMathMode(
      ctx_.cublas_handle, allow ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
  allow_tf32_ = allow;
}

// ---- entry points of device.h ----

namespace {
// Number of visible GPUs, and why there are none. Without a driver,
// cudaGetDeviceCount fails (and leaves its output unset): that is 0 GPUs.
int CountGPUs(std::string* why) {
  int n = 0;
  const cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    cudaGetLastError();
    if (why) *why = cudaGetErrorString(err);
    return 0;
  }
  if (n == 0 && why) *why = "the CUDA runtime reports 0 devices";
  return n;
}

void CheckOrdinal(const char* what, int id) {
  std::string why;
  const int n = CountGPUs(&why);
  SINGA_CHECK(n > 0, DeviceError, what, " cuda:", id, ": no CUDA device is visible (", why,
              ")");
  SINGA_CHECK(id >= 0 && id < n, DeviceError, what, " cuda:", id, ": there ",
              n == 1 ? "is " : "are ", n, " visible CUDA device", n == 1 ? "" : "s",
              " (ids 0 to ", n - 1, ")");
}

std::mutex& RegistryMutex() {
  static std::mutex m;
  return m;
}
// One device object per ordinal, kept for the life of the process (never
// destroyed: at exit the CUDA runtime may be gone before static destructors).
std::vector<std::shared_ptr<CudaGPU>>& Registry() {
  static auto* devices = new std::vector<std::shared_ptr<CudaGPU>>();
  return *devices;
}

CudaGPU* AsCudaGPU(const std::shared_ptr<Device>& dev, const char* what) {
  auto* gpu = dynamic_cast<CudaGPU*>(dev.get());
  SINGA_CHECK(gpu != nullptr, DeviceError, what, ": ", dev ? dev->name() : "None",
              " is not a CUDA device");
  return gpu;
}
}  // namespace

namespace cuda {
std::shared_ptr<CudaGPU> GetDevice(int ordinal) {
  std::lock_guard<std::mutex> lock(RegistryMutex());
  auto& reg = Registry();
  if (reg.size() <= static_cast<size_t>(ordinal)) reg.resize(ordinal + 1);
  if (!reg[ordinal]) reg[ordinal] = std::make_shared<CudaGPU>(ordinal);
  return reg[ordinal];
}
}  // namespace cuda

bool HasCuda() { return true; }

int GetNumGPUs() { return CountGPUs(nullptr); }

std::shared_ptr<Device> CreateCudaGPU(int id) {
  CheckOrdinal("cannot create", id);
  return cuda::GetDevice(id);
}

std::string DeviceQuery(int id) {
  CheckOrdinal("cannot query", id);
  cudaDeviceProp p;
  SINGA_CUDA_CHECK(cudaGetDeviceProperties(&p, id));
  int driver = 0, runtime = 0;
  SINGA_CUDA_CHECK(cudaDriverGetVersion(&driver));
  SINGA_CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
  std::ostringstream os;
  os << "cuda:" << id << ": " << p.name << "\n"
     << "  compute capability: " << p.major << "." << p.minor << "\n"
     << "  multiprocessors: " << p.multiProcessorCount << "\n"
     << "  global memory: " << p.totalGlobalMem << " bytes\n"
     << "  shared memory per block: " << p.sharedMemPerBlock << " bytes\n"
     << "  L2 cache: " << p.l2CacheSize << " bytes\n"
     << "  max threads per block: " << p.maxThreadsPerBlock << "\n"
     << "  warp size: " << p.warpSize << "\n"
     << "  driver / runtime version: " << driver / 1000 << "." << (driver % 1000) / 10
     << " / " << runtime / 1000 << "." << (runtime % 1000) / 10 << "\n";
  return os.str();
}

std::vector<size_t> GetGPUMemSize(int id) {
  CheckOrdinal("cannot query", id);
  SINGA_CUDA_CHECK(cudaSetDevice(id));
  size_t free_b = 0, total_b = 0;
  SINGA_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  return {free_b, total_b};
}

void SetAllowTF32(const std::shared_ptr<Device>& dev, bool allow) {
  AsCudaGPU(dev, "set_allow_tf32")->SetAllowTF32(allow);
}

bool GetAllowTF32(const std::shared_ptr<Device>& dev) {
  auto* gpu = dynamic_cast<CudaGPU*>(dev.get());
  return gpu && gpu->allow_tf32();
}

}  // namespace singa
