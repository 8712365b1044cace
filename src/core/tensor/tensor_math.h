// The op layer between Tensor (tensor.cc) and the backends. Kernels see raw
// pointers plus an ElemSpace describing strides, so strided views are handled
// in one place; each backend specialises Math<Lang> in its own file
// (tensor_math_cpp.h, tensor_math_cuda.h).
#ifndef SINGA_SRC_CORE_TENSOR_TENSOR_MATH_H_
#define SINGA_SRC_CORE_TENSOR_TENSOR_MATH_H_

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <type_traits>
#include <vector>

#include "singa/core/common.h"
#include "singa/core/device.h"

#ifdef __CUDACC__
#define SINGA_HD __host__ __device__
#else
#define SINGA_HD
#endif

namespace singa {

// float16 storage type; arithmetic happens after conversion to float.
struct Half {
  uint16_t bits;
};

// Scalar functors generated from ops.def, usable on host and device.
namespace op {
#ifndef __CUDACC__
using std::acos;
using std::acosh;
using std::asin;
using std::asinh;
using std::atan;
using std::atanh;
using std::ceil;
using std::cos;
using std::cosh;
using std::erf;
using std::exp;
using std::floor;
using std::log;
using std::log1p;
using std::nearbyint;
using std::pow;
using std::round;
using std::sin;
using std::sinh;
using std::sqrt;
using std::tan;
using std::tanh;
#else
// Device overloads that mirror std:: on the host: float calls the float
// function, and an integer argument (int32 formulas run in int64_t, see
// EvalType) is computed in double.
#define SINGA_CUDA_MATH1(fn)                                                \
  SINGA_HD inline float fn(float x) { return ::fn##f(x); }                 \
  SINGA_HD inline double fn(double x) { return ::fn(x); }                  \
  SINGA_HD inline double fn(int32_t x) { return ::fn(static_cast<double>(x)); } \
  SINGA_HD inline double fn(int64_t x) { return ::fn(static_cast<double>(x)); }
SINGA_CUDA_MATH1(acos)
SINGA_CUDA_MATH1(acosh)
SINGA_CUDA_MATH1(asin)
SINGA_CUDA_MATH1(asinh)
SINGA_CUDA_MATH1(atan)
SINGA_CUDA_MATH1(atanh)
SINGA_CUDA_MATH1(ceil)
SINGA_CUDA_MATH1(cos)
SINGA_CUDA_MATH1(cosh)
SINGA_CUDA_MATH1(erf)
SINGA_CUDA_MATH1(exp)
SINGA_CUDA_MATH1(floor)
SINGA_CUDA_MATH1(log)
SINGA_CUDA_MATH1(log1p)
SINGA_CUDA_MATH1(nearbyint)
SINGA_CUDA_MATH1(round)
SINGA_CUDA_MATH1(sin)
SINGA_CUDA_MATH1(sinh)
SINGA_CUDA_MATH1(sqrt)
SINGA_CUDA_MATH1(tan)
SINGA_CUDA_MATH1(tanh)
#undef SINGA_CUDA_MATH1
SINGA_HD inline float pow(float a, float b) { return ::powf(a, b); }
SINGA_HD inline double pow(double a, double b) { return ::pow(a, b); }
SINGA_HD inline double pow(int32_t a, int32_t b) {
  return ::pow(static_cast<double>(a), static_cast<double>(b));
}
SINGA_HD inline double pow(int64_t a, int64_t b) {
  return ::pow(static_cast<double>(a), static_cast<double>(b));
}
#endif

template <typename T>
SINGA_HD inline T DivOf(T a, T b) {
  if constexpr (std::is_integral<T>::value) {
    if (b == 0) return 0;
    if (b == -1) return static_cast<T>(0u - static_cast<uint32_t>(a));
    return a / b;
  } else {
    return a / b;
  }
}

// int32 formulas are evaluated in int64_t, where no sum, difference or
// product of two int32 values overflows; ToElem brings the result back.
template <typename T>
struct EvalType {
  using type = T;
};
template <>
struct EvalType<int32_t> {
  using type = int64_t;
};

// v as element type T without undefined behaviour: an integer wraps modulo
// 2^32 (as NumPy's int32 does); a floating value converted to an integer
// saturates, and NaN becomes 0.
template <typename T, typename V>
SINGA_HD inline T ToElem(V v) {
  if constexpr (std::is_integral<T>::value && std::is_floating_point<V>::value) {
    if (!(v == v)) return T(0);
    if (v >= static_cast<V>(2147483647.0)) return T(2147483647);
    if (v <= static_cast<V>(-2147483648.0)) return T(-2147483647 - 1);
    return static_cast<T>(v);
  } else if constexpr (std::is_integral<T>::value) {
    return static_cast<T>(static_cast<uint32_t>(static_cast<uint64_t>(v)));
  } else {
    return static_cast<T>(v);
  }
}

#define SINGA_UNARY_OP(Name, expr)                      \
  struct Name {                                         \
    template <typename E>                               \
    SINGA_HD E operator()(E x_) const {                 \
      using T = typename EvalType<E>::type;             \
      const T x = static_cast<T>(x_);                   \
      return ToElem<E>(expr);                           \
    }                                                   \
  };
#define SINGA_BINARY_OP(Name, expr)                     \
  struct Name {                                         \
    template <typename E>                               \
    SINGA_HD E operator()(E a_, E b_) const {           \
      using T = typename EvalType<E>::type;             \
      const T a = static_cast<T>(a_), b = static_cast<T>(b_); \
      return ToElem<E>(expr);                           \
    }                                                   \
  };
#include "singa/core/ops.def"

struct Identity {
  template <typename T>
  SINGA_HD T operator()(T x) const {
    return x;
  }
};
struct ClipOp {
  float lo, hi;
  template <typename T>
  SINGA_HD T operator()(T x) const {
    const T l = ToElem<T>(lo), h = ToElem<T>(hi);
    return x < l ? l : (x > h ? h : x);
  }
};
// alpha * x + beta * y, with a the x operand and b the y operand of Binary.
struct AxpbyOp {
  float alpha, beta;
  template <typename T>
  SINGA_HD T operator()(T a, T b) const {
    return static_cast<T>(alpha * a + beta * b);
  }
};
struct LeakyReLUOp {
  float alpha;
  template <typename T>
  SINGA_HD T operator()(T x) const {
    return x > T(0) ? x : ToElem<T>(x * alpha);
  }
};
}  // namespace op

constexpr int kMaxElemDims = 16;

// Iteration space of an element-wise op after dropping size-1 dimensions and
// merging dimensions that are contiguous for every operand. Operand 0 is the
// output; strides are in elements, 0 where an input is broadcast.
struct ElemSpace {
  int ndim = 0;
  int nops = 0;
  int64_t size = 0;
  int64_t shape[kMaxElemDims];
  int64_t stride[4][kMaxElemDims];
};

// Builds the space for out_shape; strides[k] are operand k's strides already
// aligned to out_shape (broadcast dimensions set to 0).
ElemSpace MakeElemSpace(const Shape& out_shape,
                        std::initializer_list<const Strides*> strides);

enum class ReduceKind { kSum, kMax, kMin };

// One backend per language tag. Pointers are the device's memory; every
// member gets the device's Context (the CUDA backend queues its work on the
// context's stream and returns without waiting). Inputs were checked before
// (doc/design.md: closures throw nothing a user can cause).
template <typename Lang>
struct Math {
  template <typename Op, typename T>
  static void Unary(const ElemSpace& sp, const T* x, T* y, Op op, Context* ctx);
  template <typename Op, typename T>
  static void Binary(const ElemSpace& sp, const T* a, const T* b, T* y, Op op,
                     Context* ctx);
  // y = op(a, s), or op(s, a) when scalar_first. The operands in sp are
  // y, a, s (s, a when scalar_first), s with stride 0.
  template <typename Op, typename T>
  static void BinaryScalar(const ElemSpace& sp, const T* a, T s, bool scalar_first,
                           T* y, Op op, Context* ctx);
  // y = cond != 0 ? a : b; operands in sp are y, cond, a, b.
  template <typename T>
  static void Where(const ElemSpace& sp, const T* cond, const T* a, const T* b,
                    T* y, Context* ctx);
  template <typename TI, typename TO>
  static void Cast(const ElemSpace& sp, const TI* x, TO* y, Context* ctx);
  template <typename T>
  static void Fill(const ElemSpace& sp, T value, T* y, Context* ctx);

  // x is contiguous (outer, n, inner); y is (outer, inner).
  template <typename T>
  static void Reduce(ReduceKind kind, int64_t outer, int64_t n, int64_t inner,
                     const T* x, T* y, Context* ctx);
  template <typename T>
  static void ArgReduce(bool is_max, int64_t outer, int64_t n, int64_t inner,
                        const T* x, int32_t* y, Context* ctx);
  template <typename T>
  static void Softmax(bool log, int64_t outer, int64_t n, int64_t inner,
                      const T* x, T* y, Context* ctx);

  // Row-major C = alpha * op(A) op(B) + beta * C. T is float, int32_t or
  // Half (float32 accumulation).
  template <typename T>
  static void Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                   float alpha, const T* a, int64_t lda, const T* b,
                   int64_t ldb, float beta, T* c, int64_t ldc, Context* ctx);
  // batch GEMMs with operand i at a + i * stride_a (and so on).
  template <typename T>
  static void GemmBatched(bool trans_a, bool trans_b, int64_t m, int64_t n,
                          int64_t k, float alpha, const T* a, int64_t lda,
                          int64_t stride_a, const T* b, int64_t ldb,
                          int64_t stride_b, float beta, T* c, int64_t ldc,
                          int64_t stride_c, int64_t batch, Context* ctx);

  template <typename T>
  static void Gaussian(int64_t n, float mean, float std, T* y, Context* ctx);
  template <typename T>
  static void Uniform(int64_t n, float low, float high, T* y, Context* ctx);
  template <typename T>
  static void Bernoulli(int64_t n, float p, T* y, Context* ctx);

  // y (outer, m, inner) gets the rows idx[0..m) of x (outer, n, inner);
  // negative positions count from the end, all are in range. T only sets
  // the element size (uint16_t or uint32_t): rows are copied as they are.
  template <typename T>
  static void IndexSelect(int64_t outer, int64_t n, int64_t inner, const T* x,
                          const int32_t* idx, int64_t m, T* y, Context* ctx);
  // dst (outer, n, inner) rows idx[i] += src (outer, m, inner) rows i;
  // repeated positions add up.
  template <typename T>
  static void IndexAdd(int64_t outer, int64_t n, int64_t inner, const T* src,
                       const int32_t* idx, int64_t m, T* dst, Context* ctx);
};

}  // namespace singa

#endif  // SINGA_SRC_CORE_TENSOR_TENSOR_MATH_H_
