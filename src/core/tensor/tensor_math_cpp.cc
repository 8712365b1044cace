// Math<lang::Cpp>: each element-wise, reduction and softmax kernel goes to
// the copy compiled for the CPU's ISA family (tensor_math_cpp.h, built per
// family from tensor_math_cpp_isa.cc; cpu_isa.h picks the family). GEMM goes
// to BLAS, which picks its own kernels, and the random fills stay here.
#include <random>
#include <type_traits>

#include "singa/core/blas.h"
#include "singa/core/cpu_isa.h"
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

}  // namespace cpu

using CppMath = Math<lang::Cpp>;

template <>
template <typename Op, typename T>
void CppMath::Unary(const ElemSpace& sp, const T* x, T* y, Op op) {
  SINGA_ISA_DISPATCH(Unary<Op, T>(sp, x, y, op));
}

template <>
template <typename Op, typename T>
void CppMath::Binary(const ElemSpace& sp, const T* a, const T* b, T* y,
                     Op op) {
  SINGA_ISA_DISPATCH(Binary<Op, T>(sp, a, b, y, op));
}

template <>
template <typename T>
void CppMath::Where(const ElemSpace& sp, const T* cond, const T* a,
                    const T* b, T* y) {
  SINGA_ISA_DISPATCH(Where<T>(sp, cond, a, b, y));
}

template <>
template <typename TI, typename TO>
void CppMath::Cast(const ElemSpace& sp, const TI* x, TO* y) {
  SINGA_ISA_DISPATCH(Cast<TI, TO>(sp, x, y));
}

template <>
template <typename T>
void CppMath::Fill(const ElemSpace& sp, T value, T* y) {
  SINGA_ISA_DISPATCH(Fill<T>(sp, value, y));
}

template <>
template <typename T>
void CppMath::Reduce(ReduceKind kind, int64_t outer, int64_t n, int64_t inner,
                     const T* x, T* y) {
  SINGA_ISA_DISPATCH(Reduce<T>(kind, outer, n, inner, x, y));
}

template <>
template <typename T>
void CppMath::ArgReduce(bool is_max, int64_t outer, int64_t n, int64_t inner,
                        const T* x, int32_t* y) {
  SINGA_ISA_DISPATCH(ArgReduce<T>(is_max, outer, n, inner, x, y));
}

template <>
template <typename T>
void CppMath::Softmax(bool log, int64_t outer, int64_t n, int64_t inner,
                      const T* x, T* y) {
  SINGA_ISA_DISPATCH(Softmax<T>(log, outer, n, inner, x, y));
}

template <>
template <typename T>
void CppMath::Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n,
                   int64_t k, float alpha, const T* a, int64_t lda,
                   const T* b, int64_t ldb, float beta, T* c, int64_t ldc) {
  if constexpr (std::is_same<T, float>::value) {
    UseOpenMPForBlas();
    SINGA_BLAS(cblas_sgemm)(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                            trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha,
                            a, lda, b, ldb, beta, c, ldc);
  } else {
#ifdef _OPENMP
    const int nth = m * n * k >= (1 << 15) ? omp_get_max_threads() : 1;
#endif
#pragma omp parallel for num_threads(nth) if (nth > 1)
    for (int64_t i = 0; i < m; ++i) {
      T* ci = c + i * ldc;
      for (int64_t j = 0; j < n; ++j)
        ci[j] = beta == 0.f ? T(0) : static_cast<T>(beta * ci[j]);
      for (int64_t p = 0; p < k; ++p) {
        const T av = static_cast<T>(alpha * (trans_a ? a[p * lda + i] : a[i * lda + p]));
        for (int64_t j = 0; j < n; ++j)
          ci[j] += av * (trans_b ? b[j * ldb + p] : b[p * ldb + j]);
      }
    }
  }
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

#define SINGA_CPU_UNARY(Op, T) \
  template void CppMath::Unary<Op, T>(const ElemSpace&, const T*, T*, Op);
#define SINGA_CPU_BINARY(Op, T)                                            \
  template void CppMath::Binary<Op, T>(const ElemSpace&, const T*, const T*, \
                                       T*, Op);
#define SINGA_CPU_CAST(TI, TO) \
  template void CppMath::Cast<TI, TO>(const ElemSpace&, const TI*, TO*);
#define SINGA_CPU_FILL(T) \
  template void CppMath::Fill<T>(const ElemSpace&, T, T*);
#define SINGA_CPU_TYPED(T)                                                    \
  template void CppMath::Where<T>(const ElemSpace&, const T*, const T*,       \
                                  const T*, T*);                              \
  template void CppMath::Reduce<T>(ReduceKind, int64_t, int64_t, int64_t,     \
                                   const T*, T*);                             \
  template void CppMath::ArgReduce<T>(bool, int64_t, int64_t, int64_t,        \
                                      const T*, int32_t*);                    \
  template void CppMath::Gemm<T>(bool, bool, int64_t, int64_t, int64_t, float, \
                                 const T*, int64_t, const T*, int64_t, float,  \
                                 T*, int64_t);                                 \
  template void CppMath::Gaussian<T>(int64_t, float, float, T*, Context*);    \
  template void CppMath::Uniform<T>(int64_t, float, float, T*, Context*);     \
  template void CppMath::Bernoulli<T>(int64_t, float, T*, Context*);
#define SINGA_CPU_SOFTMAX(T)                                            \
  template void CppMath::Softmax<T>(bool, int64_t, int64_t, int64_t,   \
                                    const T*, T*);
#include "tensor_math_cpp_list.h"

}  // namespace singa
