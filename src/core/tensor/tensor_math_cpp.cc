// Math<lang::Cpp>: each element-wise, reduction and softmax kernel goes to
// the copy compiled for the CPU's ISA family (tensor_math_cpp.h, built per
// family from tensor_math_cpp_isa.cc; cpu_isa.h picks the family). GEMM goes
// to BLAS, which picks its own kernels, and the random fills stay here.
#include <algorithm>
#include <cstring>
#include <random>
#include <type_traits>
#include <vector>

#include "singa/core/blas.h"
#include "singa/core/cpu_isa.h"
#include "gemm_small.h"
#include "tensor_math.h"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace singa {
namespace cpu {

SINGA_ISA_DECLARE(
    template <typename Op, typename T>
    void Unary(const ElemSpace& sp, const T* x, T* y, Op op);
    template <typename Op, typename T>
    void Binary(const ElemSpace& sp, const T* a, const T* b, T* y, Op op);
    template <typename T>
    void Where(const ElemSpace& sp, const T* cond, const T* a, const T* b,
               T* y);
    template <typename TI, typename TO>
    void Cast(const ElemSpace& sp, const TI* x, TO* y);
    template <typename T>
    void Fill(const ElemSpace& sp, T value, T* y);
    template <typename T>
    void Reduce(ReduceKind kind, int64_t outer, int64_t n, int64_t inner,
                const T* x, T* y);
    template <typename T>
    void ArgReduce(bool is_max, int64_t outer, int64_t n, int64_t inner,
                   const T* x, int32_t* y);
    template <typename T>
    void Softmax(bool log, int64_t outer, int64_t n, int64_t inner,
                 const T* x, T* y);)

namespace {

// Where a float GEMM of this shape runs best, measured against OpenBLAS with
// one thread on AVX2 (doc/performance.md, "Small GEMMs"). The BLAS packs
// both operands on every call, which pays only when each packed element is
// used many times. The small kernel wins up to 32 rows (64 while op(B) is
// at most 128K elements) or a reduction of up to 64 (32 for A^T * B).
// A * B^T (dot-product tiles) wins up to 32 rows with a reduction long
// enough to amortise adding up the lanes; A^T * B^T stays with the BLAS.
// Up to 256 rows the kernel also wins while C stays within 256 KiB and
// op(B) under 1 MiB (a batch-128 linear layer's forward and weight
// gradient): packing both operands costs OpenBLAS more there than packing
// a panel of B, or none, costs the kernel. On more than one thread,
// OpenBLAS splits products of 96 to 256 rows poorly (128 x 256 x 256 with
// B transposed ran 1.1x faster on two threads than on one), and the
// kernel, split by column panels, took 0.71-0.94x its time for A * B^T
// and 0.82-0.88x for A * B at 128-256 rows with op(B) within 2 MiB (2
// threads, AVX2 Zen 4, alternating in one process).
//
// With AVX-512 kernels active and a BLAS that runs AVX2 ones (the bundled
// OpenBLAS on AMD Zen 5), the kernel took 0.36-0.76x OpenBLAS's time from
// 8 x 1024 x 1024 to 2048^3, at one thread and two, except A * B^T with
// more than 2M elements of A (4096 x 4096 x 64: 1.6x; 1024 x 4096 x 256:
// about even).
//
// With AVX-512 kernels on both sides (OpenBLAS's SKYLAKEX kernels on Zen
// 4), the kernel took 0.84-0.96x OpenBLAS's time for A^T * B (a weight
// gradient) with a reduction of up to 128 and C of up to 512K elements
// (784 x 128 x 256 to 1024 x 128 x 512, one and two threads); beyond that
// (1024 x 128 x 1024, 2048 x 64 x 512) 0.96-1.08x at one thread. With the
// AVX2 kernels on both sides OpenBLAS stays ahead there (1.06-1.22x). Not
// measured on an Intel CPU.
bool SmallGemmWins(bool ta, bool tb, int64_t m, int64_t n, int64_t k, int threads) {
  if (ActiveIsa() == Isa::kAvx512 && !BlasKernelsAvx512())
    return !tb || ta || m * k <= (int64_t(1) << 21);
  if (ActiveIsa() == Isa::kAvx512 && ta && !tb && k <= 128 && m * n <= (int64_t(1) << 19))
    return true;
  if (threads > 1 && !ta && m >= 96 && m <= 256 && k * n <= (int64_t(1) << 19)) return true;
  if (tb) return !ta && m <= 32 && k >= 128;
  return m <= 32 || (m <= 64 && k * n <= (int64_t(1) << 17)) || k <= (ta ? 32 : 64) ||
         (m <= 256 && m * n <= (int64_t(1) << 16) && k * n < (int64_t(1) << 18));
}

}  // namespace

}  // namespace cpu

using CppMath = Math<lang::Cpp>;

// The per-ISA kernels run on the calling thread and need nothing from the
// Context, so the dispatchers drop it.
template <>
template <typename Op, typename T>
void CppMath::Unary(const ElemSpace& sp, const T* x, T* y, Op op, Context*) {
  SINGA_ISA_DISPATCH(Unary<Op, T>(sp, x, y, op));
}

template <>
template <typename Op, typename T>
void CppMath::Binary(const ElemSpace& sp, const T* a, const T* b, T* y, Op op,
                     Context*) {
  SINGA_ISA_DISPATCH(Binary<Op, T>(sp, a, b, y, op));
}

template <>
template <typename Op, typename T>
void CppMath::BinaryScalar(const ElemSpace& sp, const T* a, T s,
                           bool scalar_first, T* y, Op op, Context* ctx) {
  if (scalar_first)
    Binary(sp, &s, a, y, op, ctx);
  else
    Binary(sp, a, &s, y, op, ctx);
}

template <>
template <typename T>
void CppMath::Where(const ElemSpace& sp, const T* cond, const T* a,
                    const T* b, T* y, Context*) {
  SINGA_ISA_DISPATCH(Where<T>(sp, cond, a, b, y));
}

template <>
template <typename TI, typename TO>
void CppMath::Cast(const ElemSpace& sp, const TI* x, TO* y, Context*) {
  SINGA_ISA_DISPATCH(Cast<TI, TO>(sp, x, y));
}

template <>
template <typename T>
void CppMath::Fill(const ElemSpace& sp, T value, T* y, Context*) {
  SINGA_ISA_DISPATCH(Fill<T>(sp, value, y));
}

template <>
template <typename T>
void CppMath::Reduce(ReduceKind kind, int64_t outer, int64_t n, int64_t inner,
                     const T* x, T* y, Context*) {
  SINGA_ISA_DISPATCH(Reduce<T>(kind, outer, n, inner, x, y));
}

template <>
template <typename T>
void CppMath::ArgReduce(bool is_max, int64_t outer, int64_t n, int64_t inner,
                        const T* x, int32_t* y, Context*) {
  SINGA_ISA_DISPATCH(ArgReduce<T>(is_max, outer, n, inner, x, y));
}

template <>
template <typename T>
void CppMath::Softmax(bool log, int64_t outer, int64_t n, int64_t inner,
                      const T* x, T* y, Context*) {
  SINGA_ISA_DISPATCH(Softmax<T>(log, outer, n, inner, x, y));
}

template <>
template <typename T>
void CppMath::Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n,
                   int64_t k, float alpha, const T* a, int64_t lda,
                   const T* b, int64_t ldb, float beta, T* c, int64_t ldc,
                   Context*) {
  if constexpr (std::is_same<T, Half>::value) {
    // float16 is computed in float32: the operands are converted, and the
    // result is rounded once.
    const int64_t ar = trans_a ? k : m, ac = trans_a ? m : k;
    const int64_t br = trans_b ? n : k, bc = trans_b ? k : n;
    std::vector<float> fa(ar * ac), fb(br * bc), fc(m * n, 0.f);
    for (int64_t i = 0; i < ar; ++i)
      for (int64_t j = 0; j < ac; ++j) fa[i * ac + j] = HalfToFloat(a[i * lda + j].bits);
    for (int64_t i = 0; i < br; ++i)
      for (int64_t j = 0; j < bc; ++j) fb[i * bc + j] = HalfToFloat(b[i * ldb + j].bits);
    if (beta != 0.f)
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) fc[i * n + j] = HalfToFloat(c[i * ldc + j].bits);
    Gemm<float>(trans_a, trans_b, m, n, k, alpha, fa.data(), std::max<int64_t>(ac, 1),
                fb.data(), std::max<int64_t>(bc, 1), beta, fc.data(), std::max<int64_t>(n, 1),
                nullptr);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = Half{FloatToHalf(fc[i * n + j])};
  } else if constexpr (std::is_same<T, float>::value) {
    const GemmPath path = GetGemmPath();
#ifdef _OPENMP
    const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
#else
    const int threads = 1;
#endif
    if (path == GemmPath::kSmall ||
        (path == GemmPath::kAuto && cpu::SmallGemmWins(trans_a, trans_b, m, n, k, threads))) {
      cpu::SmallGemmThreads(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
      return;
    }
    UseOpenMPForBlas();
    SINGA_BLAS(cblas_sgemm)(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                            trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha,
                            a, lda, b, ldb, beta, c, ldc);
  } else {
    // Integer GEMM wraps modulo 2^32 like the element-wise int32 ops; the
    // float scale factors saturate when converted.
#ifdef _OPENMP
    const int nth = m * n * k >= (1 << 15) ? omp_get_max_threads() : 1;
#endif
#pragma omp parallel for num_threads(nth) if (nth > 1)
    for (int64_t i = 0; i < m; ++i) {
      T* ci = c + i * ldc;
      for (int64_t j = 0; j < n; ++j)
        ci[j] = beta == 0.f ? T(0) : op::ToElem<T>(beta * static_cast<float>(ci[j]));
      for (int64_t p = 0; p < k; ++p) {
        const T av = op::ToElem<T>(alpha * static_cast<float>(trans_a ? a[p * lda + i]
                                                                     : a[i * lda + p]));
        for (int64_t j = 0; j < n; ++j)
          ci[j] = op::ToElem<T>(static_cast<int64_t>(ci[j]) +
                                static_cast<int64_t>(av) *
                                    (trans_b ? b[j * ldb + p] : b[p * ldb + j]));
      }
    }
  }
}

template <>
template <typename T>
void CppMath::GemmBatched(bool trans_a, bool trans_b, int64_t m, int64_t n,
                          int64_t k, float alpha, const T* a, int64_t lda,
                          int64_t stride_a, const T* b, int64_t ldb,
                          int64_t stride_b, float beta, T* c, int64_t ldc,
                          int64_t stride_c, int64_t batch, Context* ctx) {
  for (int64_t i = 0; i < batch; ++i)
    Gemm(trans_a, trans_b, m, n, k, alpha, a + i * stride_a, lda, b + i * stride_b, ldb, beta,
         c + i * stride_c, ldc, ctx);
}

template <>
template <typename T>
void CppMath::Gaussian(int64_t n, float mean, float std, T* y, Context* ctx) {
  std::normal_distribution<float> dist(mean, std);
  for (int64_t i = 0; i < n; ++i)
    y[i] = static_cast<T>(dist(ctx->random_generator));
}

template <>
template <typename T>
void CppMath::Uniform(int64_t n, float low, float high, T* y, Context* ctx) {
  std::uniform_real_distribution<float> dist(low, high);
  for (int64_t i = 0; i < n; ++i)
    y[i] = static_cast<T>(dist(ctx->random_generator));
}

template <>
template <typename T>
void CppMath::Bernoulli(int64_t n, float p, T* y, Context* ctx) {
  std::bernoulli_distribution dist(p);
  for (int64_t i = 0; i < n; ++i)
    y[i] = static_cast<T>(dist(ctx->random_generator) ? 1 : 0);
}

template <>
template <typename T>
void CppMath::IndexSelect(int64_t outer, int64_t n, int64_t inner, const T* x,
                          const int32_t* idx, int64_t m, T* y, Context*) {
  const size_t row = static_cast<size_t>(inner) * sizeof(T);
#pragma omp parallel for collapse(2) if (outer * m * inner > (1 << 15))
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < m; ++i) {
      const int64_t p = idx[i] < 0 ? idx[i] + n : idx[i];
      std::memcpy(y + (o * m + i) * inner, x + (o * n + p) * inner, row);
    }
}

template <>
template <typename T>
void CppMath::IndexAdd(int64_t outer, int64_t n, int64_t inner, const T* src,
                       const int32_t* idx, int64_t m, T* dst, Context*) {
  // Positions may repeat, so each thread owns whole outer slices.
#pragma omp parallel for if (outer > 1 && outer * m * inner > (1 << 15))
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < m; ++i) {
      const int64_t p = idx[i] < 0 ? idx[i] + n : idx[i];
      T* dr = dst + (o * n + p) * inner;
      const T* sr = src + (o * m + i) * inner;
      // int32 sums wrap (ToElem) instead of overflowing.
      for (int64_t j = 0; j < inner; ++j)
        dr[j] = op::ToElem<T>(static_cast<typename op::EvalType<T>::type>(dr[j]) + sr[j]);
    }
}

#define SINGA_CPU_UNARY(Op, T) \
  template void CppMath::Unary<Op, T>(const ElemSpace&, const T*, T*, Op, Context*);
#define SINGA_CPU_BINARY(Op, T)                                                          \
  template void CppMath::Binary<Op, T>(const ElemSpace&, const T*, const T*, T*, Op,     \
                                       Context*);                                        \
  template void CppMath::BinaryScalar<Op, T>(const ElemSpace&, const T*, T, bool, T*, Op, \
                                             Context*);
#define SINGA_CPU_CAST(TI, TO) \
  template void CppMath::Cast<TI, TO>(const ElemSpace&, const TI*, TO*, Context*);
#define SINGA_CPU_FILL(T) \
  template void CppMath::Fill<T>(const ElemSpace&, T, T*, Context*);
#define SINGA_CPU_TYPED(T)                                                                \
  template void CppMath::Where<T>(const ElemSpace&, const T*, const T*, const T*, T*,     \
                                  Context*);                                              \
  template void CppMath::Reduce<T>(ReduceKind, int64_t, int64_t, int64_t, const T*, T*,   \
                                   Context*);                                             \
  template void CppMath::ArgReduce<T>(bool, int64_t, int64_t, int64_t, const T*,          \
                                      int32_t*, Context*);                                \
  template void CppMath::Gemm<T>(bool, bool, int64_t, int64_t, int64_t, float, const T*,  \
                                 int64_t, const T*, int64_t, float, T*, int64_t,          \
                                 Context*);                                               \
  template void CppMath::GemmBatched<T>(bool, bool, int64_t, int64_t, int64_t, float,     \
                                        const T*, int64_t, int64_t, const T*, int64_t,    \
                                        int64_t, float, T*, int64_t, int64_t, int64_t,    \
                                        Context*);                                        \
  template void CppMath::Gaussian<T>(int64_t, float, float, T*, Context*);                \
  template void CppMath::Uniform<T>(int64_t, float, float, T*, Context*);                 \
  template void CppMath::Bernoulli<T>(int64_t, float, T*, Context*);                      \
  template void CppMath::IndexAdd<T>(int64_t, int64_t, int64_t, const T*, const int32_t*, \
                                     int64_t, T*, Context*);
#define SINGA_CPU_SOFTMAX(T)                                                        \
  template void CppMath::Softmax<T>(bool, int64_t, int64_t, int64_t, const T*, T*, \
                                    Context*);
#include "tensor_math_cpp_list.h"

template void CppMath::Gemm<Half>(bool, bool, int64_t, int64_t, int64_t, float, const Half*,
                                  int64_t, const Half*, int64_t, float, Half*, int64_t,
                                  Context*);
template void CppMath::GemmBatched<Half>(bool, bool, int64_t, int64_t, int64_t, float,
                                         const Half*, int64_t, int64_t, const Half*, int64_t,
                                         int64_t, float, Half*, int64_t, int64_t, int64_t,
                                         Context*);
template void CppMath::IndexSelect<uint16_t>(int64_t, int64_t, int64_t, const uint16_t*,
                                             const int32_t*, int64_t, uint16_t*, Context*);
template void CppMath::IndexSelect<uint32_t>(int64_t, int64_t, int64_t, const uint32_t*,
                                             const int32_t*, int64_t, uint32_t*, Context*);

}  // namespace singa
