// The per-ISA small-GEMM kernel (gemm_small_isa.cc), declared for its
// callers: tensor_math_cpp.cc, which sends it the float GEMMs whose shape it
// wins, and the convolution's weight gradient over few pixels (conv_cpp.cc).
#ifndef SINGA_SRC_CORE_TENSOR_GEMM_SMALL_H_
#define SINGA_SRC_CORE_TENSOR_GEMM_SMALL_H_

#include <cstdint>

#include "singa/core/cpu_isa.h"

namespace singa {
namespace cpu {

SINGA_ISA_DECLARE(
    // Columns per panel: thread splits by columns keep to multiples.
    int SmallGemmPanel();
    // C = alpha * op(A) * op(B) + beta * C on the calling thread, all
    // row-major (C is not read when beta is 0).
    void SmallGemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                   float alpha, const float* a, int64_t lda, const float* b,
                   int64_t ldb, float beta, float* c, int64_t ldc);)

// SmallGemm with C split over the threads (gemm_small_cpp.cc): by column
// panels when C is wide enough, else by rows; one thread below about 128K
// multiply-adds a thread, and inside a parallel region.
void SmallGemmThreads(bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                      float alpha, const float* a, int64_t lda, const float* b,
                      int64_t ldb, float beta, float* c, int64_t ldc);

}  // namespace cpu
}  // namespace singa

#endif  // SINGA_SRC_CORE_TENSOR_GEMM_SMALL_H_
