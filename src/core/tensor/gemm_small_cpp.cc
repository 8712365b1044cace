// The small-GEMM kernel over the threads (see gemm_small.h); compiled once,
// it dispatches to the per-ISA kernel.
#include <algorithm>
#include <cstdint>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "gemm_small.h"

namespace singa {
namespace cpu {

namespace {

int SmallPanel() { SINGA_ISA_DISPATCH(SmallGemmPanel()); }

void SmallGemmOn(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                 const float* a, int64_t lda, const float* b, int64_t ldb,
                 float beta, float* c, int64_t ldc) {
  SINGA_ISA_DISPATCH(SmallGemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc));
}

}  // namespace

// Splits C over threads into column blocks (whole panels) when it is wide
// enough, else into row blocks; each thread runs the kernel on its block.
void SmallGemmThreads(bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                      float alpha, const float* a, int64_t lda, const float* b,
                      int64_t ldb, float beta, float* c, int64_t ldc) {
  int nth = 1;
#ifdef _OPENMP
  // Below about this many multiply-adds per thread, the team's start and
  // barrier cost more than the thread saves.
  constexpr int64_t kPerThread = 1 << 17;
  if (!omp_in_parallel())
    nth = int(std::min<int64_t>(omp_get_max_threads(), std::max<int64_t>(1, m * n * k / kPerThread)));
#endif
  if (nth <= 1) {
    SmallGemmOn(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  const int64_t panel = SmallPanel(), panels = (n + panel - 1) / panel;
  const bool by_cols = panels >= 2 * nth || panels >= m;
#pragma omp parallel num_threads(nth)
  {
#ifdef _OPENMP
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
#else
    const int t = 0, nt = 1;
#endif
    if (by_cols) {
      const int64_t q0 = panels * t / nt * panel, q1 = std::min(n, panels * (t + 1) / nt * panel);
      if (q1 > q0)
        SmallGemmOn(ta, tb, m, q1 - q0, k, alpha, a, lda, tb ? b + q0 * ldb : b + q0, ldb,
                    beta, c + q0, ldc);
    } else {
      const int64_t r0 = m * t / nt, r1 = m * (t + 1) / nt;
      if (r1 > r0)
        SmallGemmOn(ta, tb, r1 - r0, n, k, alpha, ta ? a + r0 : a + r0 * lda, lda, b, ldb,
                    beta, c + r0 * ldc, ldc);
    }
  }
}

}  // namespace cpu
}  // namespace singa
