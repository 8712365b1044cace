// A multiply-add loop at the family's vector width, for measuring the
// machine's peak (CpuFmaPeak in cpu_isa.h). Compiled once per ISA family.
#include <cstdint>

#include "isa_vec.h"
#include "singa/core/cpu_isa.h"

#ifndef SINGA_ISA_NS
#error "fma_probe_isa.cc is compiled per ISA: define SINGA_ISA_NS and SINGA_ISA_LEVEL"
#endif

namespace singa {
namespace cpu {
namespace SINGA_ISA_NS {

int FmaProbeFlops() { return 12 * 2 * kVW; }

// `iters` rounds of 12 independent vector multiply-adds, enough chains to
// cover the latency of two FMA pipes. Returns a value that depends on every
// lane so the loop is not optimised away.
float FmaProbe(int64_t iters) {
  const Vec mul = Vec{} + 0.9999f, add = Vec{} + 1e-4f;
  // Twelve named accumulators: an array would be kept in memory around the
  // asm statement below, turning the loop into loads and stores.
  Vec a0 = Vec{} + 0.1f, a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0,
      a7 = a0, a8 = a0, a9 = a0, a10 = a0, a11 = a0;
  for (int64_t it = 0; it < iters; ++it) {
    a0 = a0 * mul + add;
    a1 = a1 * mul + add;
    a2 = a2 * mul + add;
    a3 = a3 * mul + add;
    a4 = a4 * mul + add;
    a5 = a5 * mul + add;
    a6 = a6 * mul + add;
    a7 = a7 * mul + add;
    a8 = a8 * mul + add;
    a9 = a9 * mul + add;
    a10 = a10 * mul + add;
    a11 = a11 * mul + add;
    // Keeps the accumulators in registers and the loop from being folded.
#if (defined(__x86_64__) || defined(__i386__)) && \
    (SINGA_ISA_LEVEL < 2 || defined(__AVX512F__))
    asm volatile("" : "+v"(a0), "+v"(a1), "+v"(a2), "+v"(a3), "+v"(a4),
                 "+v"(a5), "+v"(a6), "+v"(a7), "+v"(a8), "+v"(a9), "+v"(a10),
                 "+v"(a11));
#else  // no register holds the vector (AVX-512 emulated on AVX2, tests)
    asm volatile("" ::: "memory");
#endif
  }
  const Vec sum = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7 + a8 + a9 + a10 + a11;
  float s = 0.f;
  for (int l = 0; l < kVW; ++l) s += sum[l];
  return s;
}

}  // namespace SINGA_ISA_NS
}  // namespace cpu
}  // namespace singa
