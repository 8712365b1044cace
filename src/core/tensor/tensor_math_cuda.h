// CUDA backend: Math<lang::Cuda>. Element-wise kernels run the same ops.def
// functors as the CPU over the same ElemSpace; GEMM goes to cuBLAS, random
// fills to cuRAND. Every launch is queued on the context's stream and
// checked; nothing here waits for the GPU.
//
// Kernels are kept plain: grid-stride loops, one warp per row for row
// reductions, one thread per output column otherwise. The explicit
// instantiations are in math_kernel*.cu.
#ifndef SINGA_SRC_CORE_TENSOR_TENSOR_MATH_CUDA_H_
#define SINGA_SRC_CORE_TENSOR_TENSOR_MATH_CUDA_H_

#include <cuda_fp16.h>

#include <cfloat>
#include <climits>
#include <cstdint>
#include <type_traits>

#include "device/cuda_gpu.h"
#include "tensor_math.h"

namespace singa {
namespace cuda {

constexpr int kThreads = 256;

// ---- element-wise over an ElemSpace ----

// Calls f(off) with the element offsets of item i for the first F::kOps
// operands. The loops are unrolled so that sp stays in parameter memory.
template <typename F, typename I>
__global__ void ElemKernel(const ElemSpace sp, const F f) {
  const I n = static_cast<I>(sp.size);
  const I step = static_cast<I>(gridDim.x) * blockDim.x;
  for (I i = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    int64_t off[F::kOps];
#pragma unroll
    for (int k = 0; k < F::kOps; ++k) off[k] = 0;
    I rest = i;
#pragma unroll
    for (int d = kMaxElemDims - 1; d >= 0; --d) {
      if (d < sp.ndim) {
        I idx = rest;
        if (d > 0) {
          const I len = static_cast<I>(sp.shape[d]);
          idx = rest % len;
          rest /= len;
        }
#pragma unroll
        for (int k = 0; k < F::kOps; ++k) off[k] += static_cast<int64_t>(idx) * sp.stride[k][d];
      }
    }
    f(off);
  }
}

// All operands contiguous: f.flat(i) on element i of each.
template <typename F, typename I>
__global__ void FlatKernel(const I n, const F f) {
  const I step = static_cast<I>(gridDim.x) * blockDim.x;
  for (I i = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) f.flat(i);
}

// Runs f over sp. Operand `ignore` (a broadcast scalar) does not count when
// deciding whether the space is contiguous.
template <typename F>
void LaunchElem(const ElemSpace& sp, const F& f, Context* ctx, int ignore = -1) {
  if (sp.size == 0) return;
  cudaStream_t stream = Stream(ctx);
  bool flat = sp.ndim == 1;
  for (int k = 0; k < F::kOps; ++k)
    if (k != ignore && sp.stride[k][0] != 1) flat = false;
  const unsigned blocks = Blocks(sp.size, kThreads);
  // 64-bit indices cost nothing in the flat kernel; the strided one divides
  // by the dimensions, which is cheaper in 32 bits.
  if (flat)
    FlatKernel<F, int64_t><<<blocks, kThreads, 0, stream>>>(sp.size, f);
  else if (sp.size < (int64_t(1) << 31))
    ElemKernel<F, uint32_t><<<blocks, kThreads, 0, stream>>>(sp, f);
  else
    ElemKernel<F, int64_t><<<blocks, kThreads, 0, stream>>>(sp, f);
  SINGA_CUDA_LAUNCHED(ElemKernel);
}

template <typename Op, typename T>
struct UnaryF {
  static constexpr int kOps = 2;
  const T* x;
  T* y;
  Op op;
  __device__ void operator()(const int64_t* o) const { y[o[0]] = op(x[o[1]]); }
  template <typename I>
  __device__ void flat(I i) const {
    y[i] = op(x[i]);
  }
};

template <typename Op, typename T>
struct BinaryF {
  static constexpr int kOps = 3;
  const T* a;
  const T* b;
  T* y;
  Op op;
  __device__ void operator()(const int64_t* o) const { y[o[0]] = op(a[o[1]], b[o[2]]); }
  template <typename I>
  __device__ void flat(I i) const {
    y[i] = op(a[i], b[i]);
  }
};

// The scalar travels by value (it lives on the host).
template <typename Op, typename T>
struct BinaryScalarF {
  static constexpr int kOps = 3;
  const T* a;
  T s;
  bool scalar_first;
  T* y;
  Op op;
  __device__ void operator()(const int64_t* o) const {
    const T v = a[o[scalar_first ? 2 : 1]];
    y[o[0]] = scalar_first ? op(s, v) : op(v, s);
  }
  template <typename I>
  __device__ void flat(I i) const {
    y[i] = scalar_first ? op(s, a[i]) : op(a[i], s);
  }
};

template <typename T>
struct WhereF {
  static constexpr int kOps = 4;
  const T* c;
  const T* a;
  const T* b;
  T* y;
  __device__ void operator()(const int64_t* o) const {
    y[o[0]] = c[o[1]] != T(0) ? a[o[2]] : b[o[3]];
  }
  template <typename I>
  __device__ void flat(I i) const {
    y[i] = c[i] != T(0) ? a[i] : b[i];
  }
};

__device__ inline float ToFloat(float x) { return x; }
__device__ inline float ToFloat(int32_t x) { return static_cast<float>(x); }
__device__ inline float ToFloat(Half x) { return __half2float(__ushort_as_half(x.bits)); }

// Float to int saturates and maps NaN to 0, as on the CPU.
__device__ inline int32_t SaturateToInt(float x) {
  if (!(x == x)) return 0;
  if (x >= 2147483647.0f) return INT_MAX;
  if (x <= -2147483648.0f) return INT_MIN;
  return static_cast<int32_t>(x);
}

template <typename TO, typename TI>
__device__ inline TO Convert(TI x) {
  if constexpr (std::is_same<TO, TI>::value) {
    return x;
  } else if constexpr (std::is_same<TO, Half>::value) {
    // Integers go through float, as on the CPU.
    return Half{__half_as_ushort(__float2half_rn(ToFloat(x)))};
  } else if constexpr (std::is_same<TO, int32_t>::value) {
    return SaturateToInt(ToFloat(x));
  } else {
    return ToFloat(x);
  }
}

template <typename TI, typename TO>
struct CastF {
  static constexpr int kOps = 2;
  const TI* x;
  TO* y;
  __device__ void operator()(const int64_t* o) const { y[o[0]] = Convert<TO>(x[o[1]]); }
  template <typename I>
  __device__ void flat(I i) const {
    y[i] = Convert<TO>(x[i]);
  }
};

template <typename T>
struct FillF {
  static constexpr int kOps = 1;
  T value;
  T* y;
  __device__ void operator()(const int64_t* o) const { y[o[0]] = value; }
  template <typename I>
  __device__ void flat(I i) const {
    y[i] = value;
  }
};

// ---- reductions ----

template <typename T>
__device__ inline T Lowest();
template <>
__device__ inline float Lowest<float>() {
  return -INFINITY;
}
template <>
__device__ inline int32_t Lowest<int32_t>() {
  return INT_MIN;
}
template <typename T>
__device__ inline T Highest();
template <>
__device__ inline float Highest<float>() {
  return INFINITY;
}
template <>
__device__ inline int32_t Highest<int32_t>() {
  return INT_MAX;
}

template <typename T>
struct SumR {
  __device__ static T Init() { return T(0); }
  __device__ static T Combine(T a, T b) { return a + b; }
};
// NaN wins, as in NumPy (and on the CPU).
template <typename T>
struct MaxR {
  __device__ static T Init() { return Lowest<T>(); }
  __device__ static T Combine(T a, T b) { return (b > a || b != b) ? b : a; }
};
template <typename T>
struct MinR {
  __device__ static T Init() { return Highest<T>(); }
  __device__ static T Combine(T a, T b) { return (b < a || b != b) ? b : a; }
};

template <typename T>
__device__ inline T WarpShuffleDown(T v, int delta) {
  return __shfl_down_sync(0xffffffffu, v, delta);
}

// Rows of x, each n long, cut into chunks of len: one warp reduces one
// (row, chunk) into y[row * chunks + chunk].
template <typename R, typename T>
__global__ void ReduceRowsKernel(int64_t rows, int64_t n, int64_t len, int64_t chunks,
                                 const T* x, T* y) {
  const int lane = threadIdx.x & 31;
  const int64_t warp = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  const int64_t warps = (static_cast<int64_t>(gridDim.x) * blockDim.x) >> 5;
  for (int64_t w = warp; w < rows * chunks; w += warps) {
    const int64_t r = w / chunks, c = w % chunks;
    const int64_t begin = c * len;
    const int64_t end = begin + len < n ? begin + len : n;
    const T* xr = x + r * n;
    T acc = R::Init();
    for (int64_t i = begin + lane; i < end; i += 32) acc = R::Combine(acc, xr[i]);
    for (int d = 16; d > 0; d >>= 1) acc = R::Combine(acc, WarpShuffleDown(acc, d));
    if (lane == 0) y[w] = acc;
  }
}

// x is (outer, n, inner) with inner > 1, n cut into chunks of len: one
// thread reduces one (outer, chunk, inner) column (adjacent threads read
// adjacent addresses).
template <typename R, typename T>
__global__ void ReduceColsKernel(int64_t outer, int64_t n, int64_t inner, int64_t len,
                                 int64_t chunks, const T* x, T* y) {
  const int64_t total = outer * chunks * inner;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < total;
       t += step) {
    const int64_t j = t % inner;
    const int64_t c = (t / inner) % chunks;
    const int64_t o = t / (inner * chunks);
    const int64_t begin = c * len;
    const int64_t end = begin + len < n ? begin + len : n;
    const T* xo = x + o * n * inner + j;
    T acc = R::Init();
    for (int64_t i = begin; i < end; ++i) acc = R::Combine(acc, xo[i * inner]);
    y[t] = acc;
  }
}

// Reduces (outer, n, inner) into (outer, inner). When there are few outputs
// for a long axis, a first pass reduces chunks of the axis into the
// workspace and a second pass reduces the chunks.
template <typename R, typename T>
void ReduceAxis(int64_t outer, int64_t n, int64_t inner, const T* x, T* y, Context* ctx,
                bool may_split) {
  cudaStream_t stream = Stream(ctx);
  const int64_t outputs = outer * inner;
  if (inner == 1) {
    int64_t chunks = 1;
    // One warp per row; split rows while fewer than 8192 warps would run.
    if (may_split && outer < 8192 && n > 4096) {
      chunks = (8192 + outer - 1) / outer;
      const int64_t most = (n + 1023) / 1024;
      if (chunks > most) chunks = most;
    }
    const int64_t len = (n + chunks - 1) / chunks;
    T* dst = chunks > 1 ? static_cast<T*>(Workspace(ctx, outer * chunks * sizeof(T))) : y;
    const unsigned blocks = Blocks(outer * chunks * 32, kThreads);
    ReduceRowsKernel<R, T><<<blocks, kThreads, 0, stream>>>(outer, n, len, chunks, x, dst);
    SINGA_CUDA_LAUNCHED(ReduceRowsKernel);
    if (chunks > 1) ReduceAxis<R, T>(outer, chunks, 1, dst, y, ctx, false);
    return;
  }
  int64_t chunks = 1;
  if (may_split && outputs < 65536 && n > 256) {
    chunks = (131072 + outputs - 1) / outputs;
    const int64_t most = (n + 63) / 64;
    if (chunks > most) chunks = most;
  }
  const int64_t len = (n + chunks - 1) / chunks;
  T* dst = chunks > 1 ? static_cast<T*>(Workspace(ctx, outputs * chunks * sizeof(T))) : y;
  ReduceColsKernel<R, T><<<Blocks(outputs * chunks, kThreads), kThreads, 0, stream>>>(
      outer, n, inner, len, chunks, x, dst);
  SINGA_CUDA_LAUNCHED(ReduceColsKernel);
  if (chunks > 1) ReduceAxis<R, T>(outer, chunks, inner, dst, y, ctx, false);
}

// True when (v, i) should replace the best (bv, bi) so far: the first NaN
// wins, then the first extreme value, as in NumPy.
template <typename T>
__device__ inline bool ArgBetter(bool is_max, T v, int64_t i, T bv, int64_t bi) {
  if (bi < 0) return true;
  if (bv != bv) return v != v && i < bi;
  if (v != v) return true;
  if (is_max ? v > bv : v < bv) return true;
  return v == bv && i < bi;
}

template <typename T>
__global__ void ArgReduceRowsKernel(bool is_max, int64_t rows, int64_t n, const T* x,
                                    int32_t* y) {
  const int lane = threadIdx.x & 31;
  const int64_t warp = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  const int64_t warps = (static_cast<int64_t>(gridDim.x) * blockDim.x) >> 5;
  for (int64_t r = warp; r < rows; r += warps) {
    const T* xr = x + r * n;
    T bv = T(0);
    int64_t bi = -1;
    for (int64_t i = lane; i < n; i += 32)
      if (ArgBetter(is_max, xr[i], i, bv, bi)) {
        bv = xr[i];
        bi = i;
      }
    for (int d = 16; d > 0; d >>= 1) {
      const T ov = WarpShuffleDown(bv, d);
      const int64_t oi = __shfl_down_sync(0xffffffffu, bi, d);
      if (oi >= 0 && ArgBetter(is_max, ov, oi, bv, bi)) {
        bv = ov;
        bi = oi;
      }
    }
    if (lane == 0) y[r] = static_cast<int32_t>(bi);
  }
}

template <typename T>
__global__ void ArgReduceColsKernel(bool is_max, int64_t outer, int64_t n, int64_t inner,
                                    const T* x, int32_t* y) {
  const int64_t total = outer * inner;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < total;
       t += step) {
    const T* xo = x + (t / inner) * n * inner + t % inner;
    T bv = T(0);
    int64_t bi = -1;
    for (int64_t i = 0; i < n; ++i)
      if (ArgBetter(is_max, xo[i * inner], i, bv, bi)) {
        bv = xo[i * inner];
        bi = i;
      }
    y[t] = static_cast<int32_t>(bi);
  }
}

// Softmax over rows (inner == 1): one warp per row. The maximum ignores
// NaN, like std::max on the CPU; a NaN then spreads through the sum.
__global__ void SoftmaxRowsKernel(bool log, int64_t rows, int64_t n, const float* x, float* y);
__global__ void SoftmaxColsKernel(bool log, int64_t outer, int64_t n, int64_t inner,
                                  const float* x, float* y);

// ---- the rest ----

__global__ void UniformTransformKernel(int64_t n, float low, float high, const float* u,
                                       float* y);
__global__ void BernoulliTransformKernel(int64_t n, float p, const float* u, float* y);

template <typename T>
__global__ void IntGemmKernel(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                              float alpha, const T* a, int64_t lda, const T* b, int64_t ldb,
                              float beta, T* c, int64_t ldc) {
  const int64_t total = m * n;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < total;
       t += step) {
    const int64_t i = t / n, j = t % n;
    // The CPU's order of operations: scale C, then add alpha-scaled A times B.
    T acc = beta == 0.f ? T(0) : static_cast<T>(beta * c[i * ldc + j]);
    for (int64_t p = 0; p < k; ++p) {
      const T av = static_cast<T>(alpha * (trans_a ? a[p * lda + i] : a[i * lda + p]));
      acc += av * (trans_b ? b[j * ldb + p] : b[p * ldb + j]);
    }
    c[i * ldc + j] = acc;
  }
}

template <typename T>
__global__ void IndexSelectKernel(int64_t outer, int64_t n, int64_t inner, const T* x,
                                  const int32_t* idx, int64_t m, T* y) {
  const int64_t total = outer * m * inner;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < total;
       t += step) {
    const int64_t j = t % inner;
    const int64_t i = (t / inner) % m;
    const int64_t o = t / (inner * m);
    const int64_t p = idx[i] < 0 ? idx[i] + n : idx[i];
    y[t] = x[(o * n + p) * inner + j];
  }
}

template <typename T>
__global__ void IndexAddKernel(int64_t outer, int64_t n, int64_t inner, const T* src,
                               const int32_t* idx, int64_t m, T* dst) {
  const int64_t total = outer * m * inner;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < total;
       t += step) {
    const int64_t j = t % inner;
    const int64_t i = (t / inner) % m;
    const int64_t o = t / (inner * m);
    const int64_t p = idx[i] < 0 ? idx[i] + n : idx[i];
    atomicAdd(dst + (o * n + p) * inner + j, src[t]);
  }
}

inline cublasOperation_t Op(bool trans) { return trans ? CUBLAS_OP_T : CUBLAS_OP_N; }

inline bool FitsInt(int64_t v) { return v >= 0 && v <= INT_MAX; }

}  // namespace cuda

// ---- Math<lang::Cuda> ----

template <>
template <typename Op, typename T>
void Math<lang::Cuda>::Unary(const ElemSpace& sp, const T* x, T* y, Op op, Context* ctx) {
  cuda::LaunchElem(sp, cuda::UnaryF<Op, T>{x, y, op}, ctx);
}

template <>
template <typename Op, typename T>
void Math<lang::Cuda>::Binary(const ElemSpace& sp, const T* a, const T* b, T* y, Op op,
                              Context* ctx) {
  cuda::LaunchElem(sp, cuda::BinaryF<Op, T>{a, b, y, op}, ctx);
}

template <>
template <typename Op, typename T>
void Math<lang::Cuda>::BinaryScalar(const ElemSpace& sp, const T* a, T s, bool scalar_first,
                                    T* y, Op op, Context* ctx) {
  cuda::LaunchElem(sp, cuda::BinaryScalarF<Op, T>{a, s, scalar_first, y, op}, ctx,
                   scalar_first ? 1 : 2);
}

template <>
template <typename T>
void Math<lang::Cuda>::Where(const ElemSpace& sp, const T* cond, const T* a, const T* b,
                             T* y, Context* ctx) {
  cuda::LaunchElem(sp, cuda::WhereF<T>{cond, a, b, y}, ctx);
}

template <>
template <typename TI, typename TO>
void Math<lang::Cuda>::Cast(const ElemSpace& sp, const TI* x, TO* y, Context* ctx) {
  cuda::LaunchElem(sp, cuda::CastF<TI, TO>{x, y}, ctx);
}

template <>
template <typename T>
void Math<lang::Cuda>::Fill(const ElemSpace& sp, T value, T* y, Context* ctx) {
  cuda::LaunchElem(sp, cuda::FillF<T>{value, y}, ctx);
}

template <>
template <typename T>
void Math<lang::Cuda>::Reduce(ReduceKind kind, int64_t outer, int64_t n, int64_t inner,
                              const T* x, T* y, Context* ctx) {
  if (outer * inner == 0) return;
  if (n == 0) {
    // Only a sum has an identity for an empty axis; callers reject max/min.
    SINGA_CUDA_CHECK(cudaMemsetAsync(y, 0, outer * inner * sizeof(T), cuda::Stream(ctx)));
    return;
  }
  switch (kind) {
    case ReduceKind::kSum:
      cuda::ReduceAxis<cuda::SumR<T>>(outer, n, inner, x, y, ctx, true);
      break;
    case ReduceKind::kMax:
      cuda::ReduceAxis<cuda::MaxR<T>>(outer, n, inner, x, y, ctx, true);
      break;
    case ReduceKind::kMin:
      cuda::ReduceAxis<cuda::MinR<T>>(outer, n, inner, x, y, ctx, true);
      break;
  }
}

template <>
template <typename T>
void Math<lang::Cuda>::ArgReduce(bool is_max, int64_t outer, int64_t n, int64_t inner,
                                 const T* x, int32_t* y, Context* ctx) {
  if (outer * inner == 0) return;
  cudaStream_t stream = cuda::Stream(ctx);
  if (inner == 1) {
    cuda::ArgReduceRowsKernel<T><<<cuda::Blocks(outer * 32, cuda::kThreads), cuda::kThreads, 0,
                                   stream>>>(is_max, outer, n, x, y);
    SINGA_CUDA_LAUNCHED(ArgReduceRowsKernel);
  } else {
    cuda::ArgReduceColsKernel<T><<<cuda::Blocks(outer * inner, cuda::kThreads), cuda::kThreads,
                                   0, stream>>>(is_max, outer, n, inner, x, y);
    SINGA_CUDA_LAUNCHED(ArgReduceColsKernel);
  }
}

}  // namespace singa

#endif  // SINGA_SRC_CORE_TENSOR_TENSOR_MATH_CUDA_H_
