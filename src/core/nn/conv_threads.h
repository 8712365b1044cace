// Thread counts and per-thread scratch of the convolution drivers
// (conv_cpp.cc, winograd_cpp.cc). For sources compiled once only: the
// per-ISA files must not include it (see cmake/CheckIsaSymbols.cmake).
#ifndef SINGA_SRC_CORE_NN_CONV_THREADS_H_
#define SINGA_SRC_CORE_NN_CONV_THREADS_H_

#ifdef _OPENMP
#include <omp.h>
#endif

#include <cstddef>
#include <cstdint>
#include <vector>

namespace singa {
namespace cpu {

// Below this many multiply-adds a call runs on one thread.
constexpr int64_t kParallelMacs = int64_t(1) << 18;
// Below this many floats a copy (or another pass that waits on memory more
// than it computes) runs on one thread.
constexpr int64_t kParallelCopy = int64_t(1) << 15;

#ifdef _OPENMP
inline int MaxThreads() { return omp_get_max_threads(); }
inline int ThreadId() { return omp_get_thread_num(); }
#else
inline int MaxThreads() { return 1; }
inline int ThreadId() { return 0; }
#endif

inline int ThreadsFor(int64_t macs) {
  return macs >= kParallelMacs ? MaxThreads() : 1;
}

// Per-thread scratch, kept between calls so a training loop does not pay for
// fresh pages on every step; 64-byte aligned. Slot 0 is the kernels' working
// space, slot 1 holds rearranged or transformed weights for the call. The
// drivers never nest, except that the few-pixel gradients (conv_few_cpp.cc)
// call the forward pass: they keep their operands in slot 2.
inline float* ThreadWork(size_t floats, int slot = 0) {
  thread_local std::vector<float> bufs[3];
  std::vector<float>& buf = bufs[slot];
  if (buf.size() < floats + 16) buf.resize(floats + 16);
  const uintptr_t at = reinterpret_cast<uintptr_t>(buf.data());
  return buf.data() + ((64 - at % 64) % 64) / sizeof(float);
}

}  // namespace cpu
}  // namespace singa

#endif  // SINGA_SRC_CORE_NN_CONV_THREADS_H_
