// Picks the ISA of the CPU kernels once, from cpuid (see cpu_isa.h).
#include "singa/core/cpu_isa.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace singa {
namespace cpu {

namespace {

bool CompiledIn(Isa isa) {
  switch (isa) {
    case Isa::kBaseline:
      return true;
    case Isa::kAvx2:
#ifdef SINGA_HAVE_ISA_AVX2
      return true;
#else
      return false;
#endif
    case Isa::kAvx512:
#ifdef SINGA_HAVE_ISA_AVX512
      return true;
#else
      return false;
#endif
  }
  return false;
}

// The features each family's copy is compiled with (CMakeLists.txt); the
// compiler runtime also checks that the OS saves the wider registers.
bool CpuRuns(Isa isa) {
  if (isa == Isa::kBaseline) return true;
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") &&
                    __builtin_cpu_supports("fma") &&
                    __builtin_cpu_supports("f16c");
  if (isa == Isa::kAvx2) return avx2;
#ifdef SINGA_ISA_EMULATE_AVX512
  // Test builds compile the AVX-512 copy for AVX2, to run its blocking and
  // tail logic on machines without AVX-512.
  return avx2;
#else
  return avx2 && __builtin_cpu_supports("avx512f") &&
         __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512dq") &&
         __builtin_cpu_supports("avx512vl");
#endif
#else
  return false;
#endif
}

Isa Best() {
  Isa best = Isa::kBaseline;
  for (Isa isa : {Isa::kAvx2, Isa::kAvx512})
    if (IsaAvailable(isa)) best = isa;
  if (const char* env = std::getenv("SINGA_CPU_ISA")) {
    try {
      const Isa want = ParseIsa(env);
      if (int(want) < int(best)) best = want;
    } catch (const std::invalid_argument&) {
      // An unknown value leaves the choice to cpuid rather than failing at
      // the first tensor op.
    }
  }
  return best;
}

std::atomic<int> g_isa{-1};

}  // namespace

bool IsaAvailable(Isa isa) { return CompiledIn(isa) && CpuRuns(isa); }

Isa ActiveIsa() {
  int v = g_isa.load(std::memory_order_relaxed);
  if (v < 0) {
    v = int(Best());
    g_isa.store(v, std::memory_order_relaxed);
  }
  return Isa(v);
}

void UseIsa(Isa isa) {
  if (!IsaAvailable(isa))
    throw std::invalid_argument(std::string("cpu ISA ") + IsaName(isa) +
                                " is not available: " +
                                (CompiledIn(isa) ? "this CPU lacks it"
                                                 : "this build lacks it"));
  g_isa.store(int(isa), std::memory_order_relaxed);
}

const char* IsaName(Isa isa) {
  switch (isa) {
    case Isa::kAvx2:
      return "avx2";
    case Isa::kAvx512:
      return "avx512";
    default:
      return "baseline";
  }
}

Isa ParseIsa(const std::string& name) {
  for (Isa isa : {Isa::kBaseline, Isa::kAvx2, Isa::kAvx512})
    if (name == IsaName(isa)) return isa;
  throw std::invalid_argument("unknown cpu ISA '" + name +
                              "' (expected baseline, avx2 or avx512)");
}

SINGA_ISA_DECLARE(int FmaProbeFlops(); float FmaProbe(int64_t iters);)

namespace {
int ProbeFlops() { SINGA_ISA_DISPATCH(FmaProbeFlops()); }
float Probe(int64_t iters) { SINGA_ISA_DISPATCH(FmaProbe(iters)); }
}  // namespace

}  // namespace cpu

std::string CpuIsa() { return cpu::IsaName(cpu::ActiveIsa()); }

void SetCpuIsa(const std::string& name) { cpu::UseIsa(cpu::ParseIsa(name)); }

namespace {
const char* const kGemmPathNames[] = {"auto", "blas", "small"};
std::atomic<int> g_gemm_path{int(GemmPath::kAuto)};
}  // namespace

void SetGemmPath(GemmPath path) { g_gemm_path.store(int(path), std::memory_order_relaxed); }
GemmPath GetGemmPath() { return GemmPath(g_gemm_path.load(std::memory_order_relaxed)); }

std::string CpuGemmPath() { return kGemmPathNames[int(GetGemmPath())]; }

void SetCpuGemmPath(const std::string& name) {
  for (int i = 0; i < 3; ++i)
    if (name == kGemmPathNames[i]) return SetGemmPath(GemmPath(i));
  throw std::invalid_argument("unknown GEMM path '" + name + "' (expected auto, blas or small)");
}

double CpuFmaPeak(int threads, double seconds) {
  if (threads < 1 || !(seconds > 0))
    throw std::invalid_argument("CpuFmaPeak: needs threads >= 1 and seconds > 0");
  using Clock = std::chrono::steady_clock;
  volatile float sink = 0.f;
  auto run = [&](int64_t iters) {
    float s = 0.f;
    const auto t0 = Clock::now();
#pragma omp parallel num_threads(threads) reduction(+ : s)
    s += cpu::Probe(iters);
    sink = s;
    return std::chrono::duration<double>(Clock::now() - t0).count();
  };
  // Short runs, the best of many: on a busy machine some of them still run
  // undisturbed.
  int64_t iters = 1 << 16;
  while (run(iters) < seconds / 40) iters *= 2;
  double best = 1e30, spent = 0.0;
  for (int r = 0; r < 5 || spent < seconds; ++r) {
    const double t = run(iters);
    best = std::min(best, t);
    spent += t;
  }
  return double(threads) * double(iters) * cpu::ProbeFlops() / best * 1e-9;
}

}  // namespace singa
