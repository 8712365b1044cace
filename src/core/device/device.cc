#include "singa/core/device.h"

#include <atomic>
#include <cstdlib>
#include <limits>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "singa/core/blas.h"

namespace singa {

size_t Product(const Shape& shape) {
  size_t n = 1;
  for (size_t d : shape) {
    if (d != 0 && n > std::numeric_limits<size_t>::max() / 4 / d)
      SINGA_THROW(MemoryError, "shape ", shape, " has too many elements");
    n *= d;
  }
  return n;
}

Strides ContiguousStrides(const Shape& shape) {
  Strides s(shape.size());
  int64_t acc = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    s[i] = acc;
    acc *= static_cast<int64_t>(shape[i] ? shape[i] : 1);
  }
  return s;
}

Block::~Block() {
  if (data_ && device_) device_->FreeBlock(data_);
}

std::shared_ptr<Block> Device::NewBlock(size_t size) {
  void* ptr = Malloc(size);
  if (ptr == nullptr && size > 0)
    SINGA_THROW(MemoryError, "cannot allocate ", size, " bytes on ", name());
  return std::make_shared<Block>(ptr, size, shared_from_this());
}

void Device::Exec(const std::function<void(Context*)>& fn,
                  const std::vector<Block*>&, const std::vector<Block*>&) {
  fn(&ctx_);
}

std::string Device::name() const {
  return id_ == 0 ? "cpu" : "cpu:" + std::to_string(id_);
}

namespace {
// Id 0 belongs to the default device.
std::atomic<int> next_cpu_id{1};
}  // namespace

CppCPU::CppCPU() : Device(next_cpu_id++) {}
CppCPU::CppCPU(int id) : Device(id) {}

void CppCPU::CopyDataToFrom(void* dst, const void* src, size_t nbytes,
                            CopyDirection) {
  if (nbytes) std::memcpy(dst, src, nbytes);
}

void* CppCPU::Malloc(size_t size) {
  if (size == 0) return nullptr;
  // 64-byte alignment lets AVX-512 loads start on a cache line.
  size_t rounded = (size + 63) / 64 * 64;
  return std::aligned_alloc(64, rounded);
}

void CppCPU::Free(void* ptr) { std::free(ptr); }

std::shared_ptr<Device> DefaultDevice() {
  static std::shared_ptr<Device> dev = std::make_shared<CppCPU>(0);
  return dev;
}

void SetNumThreads(int n) {
  SINGA_CHECK(n >= 1, ValueError, "set_num_threads: need at least 1 thread, got ", n);
#ifdef _OPENMP
  omp_set_num_threads(n);
#endif
#ifndef SINGA_BLAS_NO_PREFIX
  SINGA_BLAS(openblas_set_num_threads)(n);
#endif
}

int GetNumThreads() {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

#ifndef USE_CUDA
bool HasCuda() { return false; }
int GetNumGPUs() { return 0; }
std::shared_ptr<Device> CreateCudaGPU(int id) {
  SINGA_THROW(DeviceError, "cannot create cuda:", id,
              ": this singa build has no CUDA support (rebuild with USE_CUDA=ON)");
}
std::string DeviceQuery(int id) {
  SINGA_THROW(DeviceError, "cannot query cuda:", id,
              ": this singa build has no CUDA support (rebuild with USE_CUDA=ON)");
}
#endif

}  // namespace singa
