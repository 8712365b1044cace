// A multiply-add loop at the family's vector width, for measuring the
// machine's peak (CpuFmaPeak in cpu_isa.h). Compiled once per ISA family.
#include <cstdint>

#include "singa/core/cpu_isa.h"

#ifndef SINGA_ISA_NS
#error "fma_probe_isa.cc is compiled per ISA: define SINGA_ISA_NS and SINGA_ISA_LEVEL"
#endif

namespace singa {
namespace cpu {
namespace SINGA_ISA_NS {

#if SINGA_ISA_LEVEL >= 2
constexpr int kVW = 16;
#elif SINGA_ISA_LEVEL == 1
constexpr int kVW = 8;
#else
constexpr int kVW = 4;
#endif

int FmaProbeFlops() { return 12 * 2 * kVW; }

// `iters` rounds of 12 independent vector multiply-adds, enough chains to
// cover the latency of two FMA pipes. Returns a value that depends on every
// lane so the loop is not optimised away.
float FmaProbe(int64_t iters) {
  typedef float Vec __attribute__((vector_size(kVW * sizeof(float))));
  Vec acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = Vec{} + 0.001f * float(i);
  const Vec mul = Vec{} + 0.9999f, add = Vec{} + 1e-4f;
  for (int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) acc[i] = acc[i] * mul + add;
    // Keeps the accumulators in registers and the loop from being folded.
#if (defined(__x86_64__) || defined(__i386__)) && \
    (SINGA_ISA_LEVEL < 2 || defined(__AVX512F__))
    asm volatile("" : "+v"(acc[0]), "+v"(acc[1]), "+v"(acc[2]), "+v"(acc[3]),
                 "+v"(acc[4]), "+v"(acc[5]), "+v"(acc[6]), "+v"(acc[7]),
                 "+v"(acc[8]), "+v"(acc[9]), "+v"(acc[10]), "+v"(acc[11]));
#else  // no register holds the vector (AVX-512 emulated on AVX2, tests)
    asm volatile("" ::: "memory");
#endif
  }
  float s = 0.f;
  for (int i = 0; i < 12; ++i)
    for (int l = 0; l < kVW; ++l) s += acc[i][l];
  return s;
}

}  // namespace SINGA_ISA_NS
}  // namespace cpu
}  // namespace singa
