// Run-time choice of the CPU instruction set for the hot loops.
//
// The element-wise math, convolution, pooling and batch-norm kernels are
// compiled once per x86 ISA family, each copy in its own namespace
// (singa::cpu::isa_baseline, isa_avx2, isa_avx512; see CMakeLists.txt), and
// one copy is chosen when the first kernel runs: the best one that this
// build contains and this CPU (and OS) supports. So a build made on an
// AVX-512 machine still runs on an AVX2 one, and the other way round. The
// environment variable SINGA_CPU_ISA (baseline, avx2, avx512) can only
// lower that choice; UseIsa does the same at run time (tests use it to run
// every path the machine can execute).
#ifndef SINGA_CORE_CPU_ISA_H_
#define SINGA_CORE_CPU_ISA_H_

#include <string>

namespace singa {
namespace cpu {

enum class Isa { kBaseline = 0, kAvx2 = 1, kAvx512 = 2 };

// The ISA the kernels use now.
Isa ActiveIsa();
// Whether this build has kernels for `isa` and this CPU can run them.
bool IsaAvailable(Isa isa);
// Switches the kernels to `isa`; throws std::invalid_argument when it is not
// available. Not meant to be called while kernels run on other threads.
void UseIsa(Isa isa);
const char* IsaName(Isa isa);
// Parses "baseline", "avx2" or "avx512"; throws std::invalid_argument.
Isa ParseIsa(const std::string& name);

}  // namespace cpu

// Where float GEMMs on the CPU run: kAuto picks by shape between the
// per-ISA small-GEMM kernel (few rows or a short reduction) and the BLAS;
// kBlas and kSmall force one of them (for tests and benchmarks).
enum class GemmPath { kAuto = 0, kBlas = 1, kSmall = 2 };
void SetGemmPath(GemmPath path);
GemmPath GetGemmPath();

// For Python (api/core_cpu.i): the active family's name, switching family
// (ValueError when unavailable), and the multiply-add rate in GFLOP/s that
// `threads` threads reach at the active family's vector width, measured for
// about `seconds`.
std::string CpuIsa();
void SetCpuIsa(const std::string& name);
double CpuFmaPeak(int threads, double seconds);
// The one-way time in nanoseconds of a cache line passed back and forth
// between CPUs cpu_a and cpu_b (the median over about `seconds`); on a
// virtual machine it shows whether two vCPUs share a die. ValueError for a
// CPU this thread may not run on; RuntimeError where threads cannot be
// pinned (outside Linux). The calling thread's CPU set is restored.
double CpuCoreToCoreNs(int cpu_a, int cpu_b, double seconds);
// The GemmPath as "auto", "blas" or "small"; setting an unknown name throws
// std::invalid_argument (ValueError in Python).
std::string CpuGemmPath();
void SetCpuGemmPath(const std::string& name);
}  // namespace singa

// Calls `call` (a function call expression without its namespace) in the
// namespace of the active ISA and returns its value, e.g.
// SINGA_ISA_DISPATCH(Relu<float>(x, y, n)).
// Every ISA namespace must declare the function.
#if defined(SINGA_HAVE_ISA_AVX512)
#define SINGA_ISA_CASE_AVX512(...) \
  case ::singa::cpu::Isa::kAvx512: \
    return ::singa::cpu::isa_avx512::__VA_ARGS__;
#else
#define SINGA_ISA_CASE_AVX512(...)
#endif
#if defined(SINGA_HAVE_ISA_AVX2)
#define SINGA_ISA_CASE_AVX2(...) \
  case ::singa::cpu::Isa::kAvx2:   \
    return ::singa::cpu::isa_avx2::__VA_ARGS__;
#else
#define SINGA_ISA_CASE_AVX2(...)
#endif
#define SINGA_ISA_DISPATCH(...)                          \
  do {                                                   \
    switch (::singa::cpu::ActiveIsa()) {                 \
      SINGA_ISA_CASE_AVX512(__VA_ARGS__)                 \
      SINGA_ISA_CASE_AVX2(__VA_ARGS__)                   \
      default:                                           \
        return ::singa::cpu::isa_baseline::__VA_ARGS__;  \
    }                                                    \
  } while (0)

// Declares the same things in every ISA namespace this build has.
#if defined(SINGA_HAVE_ISA_AVX512)
#define SINGA_ISA_DECLARE_AVX512(...) \
  namespace isa_avx512 {              \
  __VA_ARGS__                         \
  }
#else
#define SINGA_ISA_DECLARE_AVX512(...)
#endif
#if defined(SINGA_HAVE_ISA_AVX2)
#define SINGA_ISA_DECLARE_AVX2(...) \
  namespace isa_avx2 {              \
  __VA_ARGS__                       \
  }
#else
#define SINGA_ISA_DECLARE_AVX2(...)
#endif
#define SINGA_ISA_DECLARE(...)          \
  namespace isa_baseline {              \
  __VA_ARGS__                           \
  }                                     \
  SINGA_ISA_DECLARE_AVX2(__VA_ARGS__)   \
  SINGA_ISA_DECLARE_AVX512(__VA_ARGS__)

#endif  // SINGA_CORE_CPU_ISA_H_
