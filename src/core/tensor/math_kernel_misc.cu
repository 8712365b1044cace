// The CUDA backend apart from the ops.def functors: casts, fills, where,
// reductions, softmax, GEMM (cuBLAS), random fills (cuRAND) and row
// gathers, with their explicit instantiations.
#include "tensor_math_cuda.h"

namespace singa {
namespace cuda {

__global__ void SoftmaxRowsKernel(bool log, int64_t rows, int64_t n, const float* x,
                                  float* y) {
  const int lane = threadIdx.x & 31;
  const int64_t warp = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  const int64_t warps = (static_cast<int64_t>(gridDim.x) * blockDim.x) >> 5;
  for (int64_t r = warp; r < rows; r += warps) {
    const float* xr = x + r * n;
    float* yr = y + r * n;
    float mx = -FLT_MAX;
    for (int64_t i = lane; i < n; i += 32) mx = mx < xr[i] ? xr[i] : mx;
    for (int d = 16; d > 0; d >>= 1) {
      const float o = __shfl_down_sync(0xffffffffu, mx, d);
      mx = mx < o ? o : mx;
    }
    mx = __shfl_sync(0xffffffffu, mx, 0);
    float sum = 0.f;
    for (int64_t i = lane; i < n; i += 32) sum += expf(xr[i] - mx);
    for (int d = 16; d > 0; d >>= 1) sum += __shfl_down_sync(0xffffffffu, sum, d);
    sum = __shfl_sync(0xffffffffu, sum, 0);
    if (log) {
      const float lse = mx + logf(sum);
      for (int64_t i = lane; i < n; i += 32) yr[i] = xr[i] - lse;
    } else {
      const float inv = 1.f / sum;
      for (int64_t i = lane; i < n; i += 32) yr[i] = expf(xr[i] - mx) * inv;
    }
  }
}

__global__ void SoftmaxColsKernel(bool log, int64_t outer, int64_t n, int64_t inner,
                                  const float* x, float* y) {
  const int64_t total = outer * inner;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < total;
       t += step) {
    const int64_t base = (t / inner) * n * inner + t % inner;
    const float* xo = x + base;
    float* yo = y + base;
    float mx = -FLT_MAX;
    for (int64_t i = 0; i < n; ++i) mx = mx < xo[i * inner] ? xo[i * inner] : mx;
    float sum = 0.f;
    for (int64_t i = 0; i < n; ++i) sum += expf(xo[i * inner] - mx);
    if (log) {
      const float lse = mx + logf(sum);
      for (int64_t i = 0; i < n; ++i) yo[i * inner] = xo[i * inner] - lse;
    } else {
      const float inv = 1.f / sum;
      for (int64_t i = 0; i < n; ++i) yo[i * inner] = expf(xo[i * inner] - mx) * inv;
    }
  }
}

// cuRAND's uniform numbers u are in (0, 1]; 1 - u is in [0, 1), as on the
// CPU. u may be y itself.
__global__ void UniformTransformKernel(int64_t n, float low, float high, const float* u,
                                       float* y) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step)
    y[i] = low + (high - low) * (1.f - u[i]);
}

// u in (0, 1] is at most p with probability p.
__global__ void BernoulliTransformKernel(int64_t n, float p, const float* u, float* y) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step)
    y[i] = u[i] <= p ? 1.f : 0.f;
}

namespace {
// Where cuRAND may write n floats: y itself when n is even and y 16-byte
// aligned (normal samples come in pairs; a view may start anywhere), else
// the workspace.
float* RandomTarget(int64_t n, float* y, Context* ctx, size_t* count) {
  const bool direct = n % 2 == 0 && reinterpret_cast<uintptr_t>(y) % 16 == 0;
  *count = static_cast<size_t>(n + n % 2);
  return direct ? y : static_cast<float*>(Workspace(ctx, *count * sizeof(float)));
}

void CopyBack(float* from, float* y, int64_t n, cudaStream_t stream) {
  if (from != y)
    SINGA_CUDA_CHECK(
        cudaMemcpyAsync(y, from, n * sizeof(float), cudaMemcpyDeviceToDevice, stream));
}
}  // namespace

}  // namespace cuda

template <>
template <typename T>
void Math<lang::Cuda>::Softmax(bool log, int64_t outer, int64_t n, int64_t inner, const T* x,
                               T* y, Context* ctx) {
  static_assert(std::is_same<T, float>::value, "softmax is float32 only");
  if (outer * n * inner == 0) return;
  cudaStream_t stream = cuda::Stream(ctx);
  if (inner == 1) {
    cuda::SoftmaxRowsKernel<<<cuda::Blocks(outer * 32, cuda::kThreads), cuda::kThreads, 0,
                              stream>>>(log, outer, n, x, y);
    SINGA_CUDA_LAUNCHED(SoftmaxRowsKernel);
  } else {
    cuda::SoftmaxColsKernel<<<cuda::Blocks(outer * inner, cuda::kThreads), cuda::kThreads, 0,
                              stream>>>(log, outer, n, inner, x, y);
    SINGA_CUDA_LAUNCHED(SoftmaxColsKernel);
  }
}

// Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: cuBLAS
// gets B first, with m and n swapped.
template <>
template <typename T>
void Math<lang::Cuda>::Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                            float alpha, const T* a, int64_t lda, const T* b, int64_t ldb,
                            float beta, T* c, int64_t ldc, Context* ctx) {
  cudaStream_t stream = cuda::Stream(ctx);
  if constexpr (std::is_same<T, int32_t>::value) {
    cuda::IntGemmKernel<T><<<cuda::Blocks(m * n, cuda::kThreads), cuda::kThreads, 0, stream>>>(
        trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    SINGA_CUDA_LAUNCHED(IntGemmKernel);
  } else {
    cublasHandle_t h = ctx->cublas_handle;
    const cublasOperation_t oa = cuda::Op(trans_a), ob = cuda::Op(trans_b);
    const bool small = cuda::FitsInt(m) && cuda::FitsInt(n) && cuda::FitsInt(k) &&
                       cuda::FitsInt(lda) && cuda::FitsInt(ldb) && cuda::FitsInt(ldc);
    if constexpr (std::is_same<T, float>::value) {
      if (small)
        SINGA_CUBLAS_CHECK(cublasSgemm(h, ob, oa, int(n), int(m), int(k), &alpha, b, int(ldb), a,
                                       int(lda), &beta, c, int(ldc)));
      else
        SINGA_CUBLAS_CHECK(
            cublasSgemm_64(h, ob, oa, n, m, k, &alpha, b, ldb, a, lda, &beta, c, ldc));
    } else {
      static_assert(std::is_same<T, Half>::value, "GEMM is float32, float16 or int32");
      // float16 operands, float32 accumulation.
      if (small)
        SINGA_CUBLAS_CHECK(cublasGemmEx(h, ob, oa, int(n), int(m), int(k), &alpha, b, CUDA_R_16F,
                                        int(ldb), a, CUDA_R_16F, int(lda), &beta, c, CUDA_R_16F,
                                        int(ldc), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
      else
        SINGA_CUBLAS_CHECK(cublasGemmEx_64(h, ob, oa, n, m, k, &alpha, b, CUDA_R_16F, ldb, a,
                                           CUDA_R_16F, lda, &beta, c, CUDA_R_16F, ldc,
                                           CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    }
  }
}

template <>
template <typename T>
void Math<lang::Cuda>::GemmBatched(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                                   float alpha, const T* a, int64_t lda, int64_t stride_a,
                                   const T* b, int64_t ldb, int64_t stride_b, float beta, T* c,
                                   int64_t ldc, int64_t stride_c, int64_t batch, Context* ctx) {
  if constexpr (std::is_same<T, int32_t>::value) {
    for (int64_t i = 0; i < batch; ++i)
      Gemm(trans_a, trans_b, m, n, k, alpha, a + i * stride_a, lda, b + i * stride_b, ldb, beta,
           c + i * stride_c, ldc, ctx);
  } else {
    cuda::Stream(ctx);
    cublasHandle_t h = ctx->cublas_handle;
    const cublasOperation_t oa = cuda::Op(trans_a), ob = cuda::Op(trans_b);
    if constexpr (std::is_same<T, float>::value) {
      SINGA_CUBLAS_CHECK(cublasSgemmStridedBatched_64(h, ob, oa, n, m, k, &alpha, b, ldb,
                                                      stride_b, a, lda, stride_a, &beta, c, ldc,
                                                      stride_c, batch));
    } else {
      static_assert(std::is_same<T, Half>::value, "GEMM is float32, float16 or int32");
      SINGA_CUBLAS_CHECK(cublasGemmStridedBatchedEx_64(
          h, ob, oa, n, m, k, &alpha, b, CUDA_R_16F, ldb, stride_b, a, CUDA_R_16F, lda, stride_a,
          &beta, c, CUDA_R_16F, ldc, stride_c, batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    }
  }
}

template <>
template <typename T>
void Math<lang::Cuda>::Gaussian(int64_t n, float mean, float std, T* y, Context* ctx) {
  static_assert(std::is_same<T, float>::value, "random fills are float32");
  cudaStream_t stream = cuda::Stream(ctx);
  size_t count = 0;
  float* out = cuda::RandomTarget(n, y, ctx, &count);
  SINGA_CURAND_CHECK(curandGenerateNormal(ctx->curand_generator, out, count, mean, std));
  cuda::CopyBack(out, y, n, stream);
}

template <>
template <typename T>
void Math<lang::Cuda>::Uniform(int64_t n, float low, float high, T* y, Context* ctx) {
  static_assert(std::is_same<T, float>::value, "random fills are float32");
  cudaStream_t stream = cuda::Stream(ctx);
  size_t count = 0;
  float* u = cuda::RandomTarget(n, y, ctx, &count);
  SINGA_CURAND_CHECK(curandGenerateUniform(ctx->curand_generator, u, count));
  cuda::UniformTransformKernel<<<cuda::Blocks(n, cuda::kThreads), cuda::kThreads, 0, stream>>>(
      n, low, high, u, y);
  SINGA_CUDA_LAUNCHED(UniformTransformKernel);
}

template <>
template <typename T>
void Math<lang::Cuda>::Bernoulli(int64_t n, float p, T* y, Context* ctx) {
  static_assert(std::is_same<T, float>::value, "random fills are float32");
  cudaStream_t stream = cuda::Stream(ctx);
  size_t count = 0;
  float* u = cuda::RandomTarget(n, y, ctx, &count);
  SINGA_CURAND_CHECK(curandGenerateUniform(ctx->curand_generator, u, count));
  cuda::BernoulliTransformKernel<<<cuda::Blocks(n, cuda::kThreads), cuda::kThreads, 0,
                                   stream>>>(n, p, u, y);
  SINGA_CUDA_LAUNCHED(BernoulliTransformKernel);
}

template <>
template <typename T>
void Math<lang::Cuda>::IndexSelect(int64_t outer, int64_t n, int64_t inner, const T* x,
                                   const int32_t* idx, int64_t m, T* y, Context* ctx) {
  const int64_t total = outer * m * inner;
  if (total == 0) return;
  cuda::IndexSelectKernel<T><<<cuda::Blocks(total, cuda::kThreads), cuda::kThreads, 0,
                               cuda::Stream(ctx)>>>(outer, n, inner, x, idx, m, y);
  SINGA_CUDA_LAUNCHED(IndexSelectKernel);
}

template <>
template <typename T>
void Math<lang::Cuda>::IndexAdd(int64_t outer, int64_t n, int64_t inner, const T* src,
                                const int32_t* idx, int64_t m, T* dst, Context* ctx) {
  const int64_t total = outer * m * inner;
  if (total == 0) return;
  cuda::IndexAddKernel<T><<<cuda::Blocks(total, cuda::kThreads), cuda::kThreads, 0,
                            cuda::Stream(ctx)>>>(outer, n, inner, src, idx, m, dst);
  SINGA_CUDA_LAUNCHED(IndexAddKernel);
}

// ---- explicit instantiations ----

using CudaMath = Math<lang::Cuda>;

#define SINGA_INSTANTIATE_CAST(TI, TO) \
  template void CudaMath::Cast<TI, TO>(const ElemSpace&, const TI*, TO*, Context*);
#define SINGA_INSTANTIATE_CAST_FROM(TI) \
  SINGA_INSTANTIATE_CAST(TI, Half)      \
  SINGA_INSTANTIATE_CAST(TI, float)     \
  SINGA_INSTANTIATE_CAST(TI, int32_t)
SINGA_INSTANTIATE_CAST_FROM(Half)
SINGA_INSTANTIATE_CAST_FROM(float)
SINGA_INSTANTIATE_CAST_FROM(int32_t)

template void CudaMath::Fill<Half>(const ElemSpace&, Half, Half*, Context*);

#define SINGA_INSTANTIATE_TYPED(T)                                                        \
  template void CudaMath::Where<T>(const ElemSpace&, const T*, const T*, const T*, T*,    \
                                   Context*);                                             \
  template void CudaMath::Fill<T>(const ElemSpace&, T, T*, Context*);                     \
  template void CudaMath::Reduce<T>(ReduceKind, int64_t, int64_t, int64_t, const T*, T*,  \
                                    Context*);                                            \
  template void CudaMath::ArgReduce<T>(bool, int64_t, int64_t, int64_t, const T*,         \
                                       int32_t*, Context*);                               \
  template void CudaMath::IndexAdd<T>(int64_t, int64_t, int64_t, const T*,                \
                                      const int32_t*, int64_t, T*, Context*);
SINGA_INSTANTIATE_TYPED(float)
SINGA_INSTANTIATE_TYPED(int32_t)

#define SINGA_INSTANTIATE_GEMM(T)                                                         \
  template void CudaMath::Gemm<T>(bool, bool, int64_t, int64_t, int64_t, float, const T*, \
                                  int64_t, const T*, int64_t, float, T*, int64_t,         \
                                  Context*);                                              \
  template void CudaMath::GemmBatched<T>(bool, bool, int64_t, int64_t, int64_t, float,    \
                                         const T*, int64_t, int64_t, const T*, int64_t,   \
                                         int64_t, float, T*, int64_t, int64_t, int64_t,   \
                                         Context*);
SINGA_INSTANTIATE_GEMM(float)
SINGA_INSTANTIATE_GEMM(int32_t)
SINGA_INSTANTIATE_GEMM(Half)

template void CudaMath::Softmax<float>(bool, int64_t, int64_t, int64_t, const float*, float*,
                                       Context*);
template void CudaMath::Gaussian<float>(int64_t, float, float, float*, Context*);
template void CudaMath::Uniform<float>(int64_t, float, float, float*, Context*);
template void CudaMath::Bernoulli<float>(int64_t, float, float*, Context*);
template void CudaMath::IndexSelect<uint16_t>(int64_t, int64_t, int64_t, const uint16_t*,
                                              const int32_t*, int64_t, uint16_t*, Context*);
template void CudaMath::IndexSelect<uint32_t>(int64_t, int64_t, int64_t, const uint32_t*,
                                              const int32_t*, int64_t, uint32_t*, Context*);

}  // namespace singa
