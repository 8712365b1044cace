// CUDA convolution, pooling and batch norm (see nn_cuda.h).
#include "nn/nn_cuda.h"

#include <algorithm>

#include "device/cuda_gpu.h"
#include "tensor/tensor_math.h"

namespace singa {
namespace gpu {

namespace {

constexpr int kThreads = 256;
// Column buffers of at most this many bytes per chunk of images.
constexpr int64_t kColumnBudget = int64_t(256) << 20;

template <typename F>
__global__ void ForEachKernel(int64_t n, F f) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < n; t += step)
    f(t);
}

// Runs f(t) for t in [0, n) on the context's stream.
template <typename F>
void ForEach(int64_t n, const F& f, Context* ctx) {
  if (n <= 0) return;
  ForEachKernel<<<cuda::Blocks(n, kThreads), kThreads, 0, cuda::Stream(ctx)>>>(n, f);
  SINGA_CUDA_LAUNCHED(ForEachKernel);
}

// Window geometry, copied into kernels by value.
struct Geom {
  int c, h, w, kh, kw, sh, sw, pt, pl, dh, dw, oh, ow;
};

Geom ConvGeom(const cpu::ConvParams& p) {
  return {p.c, p.h, p.w, p.kh, p.kw, p.sh, p.sw, p.pad_t, p.pad_l, p.dh, p.dw, p.oh(), p.ow()};
}

Geom PoolGeom(const cpu::PoolParams& p) {
  return {p.c, p.h, p.w, p.kh, p.kw, p.sh, p.sw, p.pad_t, p.pad_l, p.dh, p.dw, p.oh(), p.ow()};
}

// col(i, row, q) = cols + i * stride_i + row * stride_row + q holds input
// image i's value under kernel tap row = (ci * kh + ki) * kw + kj at output
// position q = oy * ow + ox (0 in the padding).
struct Im2ColF {
  Geom g;
  const float* x;
  float* cols;
  int64_t stride_i, stride_row;
  __device__ void operator()(int64_t t) const {
    const int64_t P = int64_t(g.oh) * g.ow, CK = int64_t(g.c) * g.kh * g.kw;
    const int64_t q = t % P;
    const int64_t row = (t / P) % CK;
    const int64_t i = t / (P * CK);
    const int kj = row % g.kw, ki = (row / g.kw) % g.kh;
    const int64_t ci = row / (g.kh * g.kw);
    const int oy = q / g.ow, ox = q % g.ow;
    const int iy = oy * g.sh - g.pt + ki * g.dh, ix = ox * g.sw - g.pl + kj * g.dw;
    float v = 0.f;
    if (iy >= 0 && iy < g.h && ix >= 0 && ix < g.w)
      v = x[((i * g.c + ci) * g.h + iy) * g.w + ix];
    cols[i * stride_i + row * stride_row + q] = v;
  }
};

// dx(i, ci, iy, ix) is the sum of the column entries that came from it
// (columns laid out [i][row][q]); one thread per input element, no atomics.
struct Col2ImF {
  Geom g;
  const float* cols;
  float* dx;
  __device__ void operator()(int64_t t) const {
    const int64_t P = int64_t(g.oh) * g.ow, CK = int64_t(g.c) * g.kh * g.kw;
    const int ix = t % g.w, iy = (t / g.w) % g.h;
    const int64_t ci = (t / (int64_t(g.w) * g.h)) % g.c;
    const int64_t i = t / (int64_t(g.w) * g.h * g.c);
    const float* ci_cols = cols + i * CK * P + ci * g.kh * g.kw * P;
    float acc = 0.f;
    for (int ki = 0; ki < g.kh; ++ki) {
      const int ty = iy + g.pt - ki * g.dh;
      if (ty < 0 || ty % g.sh) continue;
      const int oy = ty / g.sh;
      if (oy >= g.oh) continue;
      for (int kj = 0; kj < g.kw; ++kj) {
        const int tx = ix + g.pl - kj * g.dw;
        if (tx < 0 || tx % g.sw) continue;
        const int ox = tx / g.sw;
        if (ox >= g.ow) continue;
        acc += ci_cols[(int64_t(ki) * g.kw + kj) * P + int64_t(oy) * g.ow + ox];
      }
    }
    dx[t] = acc;
  }
};

struct AddBiasF {
  const float* b;
  float* y;
  int64_t oc, P;
  __device__ void operator()(int64_t t) const { y[t] += b[(t / P) % oc]; }
};

// dyT(o, i * P + q) = dy(i, o, q) for a chunk of images.
struct TransposeDyF {
  const float* dy;
  float* dyt;
  int64_t cnt, oc, P;
  __device__ void operator()(int64_t t) const {
    const int64_t q = t % P;
    const int64_t o = (t / P) % oc;
    const int64_t i = t / (P * oc);
    dyt[o * cnt * P + i * P + q] = dy[t];
  }
};

bool Direct1x1(const cpu::ConvParams& p) {
  return p.kh == 1 && p.kw == 1 && p.sh == 1 && p.sw == 1 && p.pad_t == 0 && p.pad_l == 0 &&
         p.pad_b == 0 && p.pad_r == 0;
}

int64_t ChunkImages(int64_t n, int64_t bytes_per_image) {
  const int64_t fit = kColumnBudget / std::max<int64_t>(bytes_per_image, 1);
  return std::max<int64_t>(1, std::min<int64_t>(n, fit));
}

using CudaMath = Math<lang::Cuda>;

}  // namespace

void Conv2dForward(const float* x, const float* w, const float* b, float* y,
                   const cpu::ConvParams& p, Context* ctx) {
  const Geom g = ConvGeom(p);
  const int64_t P = int64_t(g.oh) * g.ow;
  const int64_t ocg = p.oc / p.groups, K = int64_t(p.c / p.groups) * p.kh * p.kw;
  const int64_t CK = int64_t(p.c) * p.kh * p.kw;
  const int64_t in_img = int64_t(p.c) * p.h * p.w, out_img = int64_t(p.oc) * P;
  const bool direct = Direct1x1(p);
  const int64_t nb = direct ? p.n : ChunkImages(p.n, CK * P * int64_t(sizeof(float)));
  float* cols = direct ? nullptr
                       : static_cast<float*>(cuda::Workspace(ctx, nb * CK * P * sizeof(float)));
  for (int64_t i0 = 0; i0 < p.n; i0 += nb) {
    const int64_t cnt = std::min<int64_t>(nb, p.n - i0);
    const float* src = x + i0 * in_img;
    int64_t src_img = in_img;
    if (!direct) {
      ForEach(cnt * CK * P, Im2ColF{g, src, cols, CK * P, P}, ctx);
      src = cols;
      src_img = CK * P;
    }
    // Per group, every image of the chunk: y_i[g] = W[g] (ocg x K) @ cols_i[g] (K x P).
    for (int gi = 0; gi < p.groups; ++gi)
      CudaMath::GemmBatched<float>(false, false, ocg, P, K, 1.f, w + gi * ocg * K, K, 0,
                                   src + gi * K * P, P, src_img, 0.f,
                                   y + i0 * out_img + gi * ocg * P, P, out_img, cnt, ctx);
  }
  if (b) ForEach(int64_t(p.n) * out_img, AddBiasF{b, y, p.oc, P}, ctx);
}

void Conv2dBackwardData(const float* dy, const float* w, float* dx, const cpu::ConvParams& p,
                        Context* ctx) {
  const Geom g = ConvGeom(p);
  const int64_t P = int64_t(g.oh) * g.ow;
  const int64_t ocg = p.oc / p.groups, K = int64_t(p.c / p.groups) * p.kh * p.kw;
  const int64_t CK = int64_t(p.c) * p.kh * p.kw;
  const int64_t in_img = int64_t(p.c) * p.h * p.w, out_img = int64_t(p.oc) * P;
  const bool direct = Direct1x1(p);
  const int64_t nb = direct ? p.n : ChunkImages(p.n, CK * P * int64_t(sizeof(float)));
  float* cols = direct ? nullptr
                       : static_cast<float*>(cuda::Workspace(ctx, nb * CK * P * sizeof(float)));
  for (int64_t i0 = 0; i0 < p.n; i0 += nb) {
    const int64_t cnt = std::min<int64_t>(nb, p.n - i0);
    float* dst = direct ? dx + i0 * in_img : cols;
    const int64_t dst_img = direct ? in_img : CK * P;
    // dcols_i[g] (K x P) = W[g]^T (K x ocg) @ dy_i[g] (ocg x P).
    for (int gi = 0; gi < p.groups; ++gi)
      CudaMath::GemmBatched<float>(true, false, K, P, ocg, 1.f, w + gi * ocg * K, K, 0,
                                   dy + i0 * out_img + gi * ocg * P, P, out_img, 0.f,
                                   dst + gi * K * P, P, dst_img, cnt, ctx);
    if (!direct) ForEach(cnt * in_img, Col2ImF{g, cols, dx + i0 * in_img}, ctx);
  }
}

void Conv2dBackwardWeight(const float* x, const float* dy, float* dw, const cpu::ConvParams& p,
                          Context* ctx) {
  const Geom g = ConvGeom(p);
  const int64_t P = int64_t(g.oh) * g.ow;
  const int64_t ocg = p.oc / p.groups, K = int64_t(p.c / p.groups) * p.kh * p.kw;
  const int64_t CK = int64_t(p.c) * p.kh * p.kw;
  const int64_t in_img = int64_t(p.c) * p.h * p.w, out_img = int64_t(p.oc) * P;
  const int64_t nb = ChunkImages(p.n, (CK + p.oc) * P * int64_t(sizeof(float)));
  float* cols = static_cast<float*>(cuda::Workspace(ctx, nb * (CK + p.oc) * P * sizeof(float)));
  float* dyt = cols + nb * CK * P;
  for (int64_t i0 = 0; i0 < p.n; i0 += nb) {
    const int64_t cnt = std::min<int64_t>(nb, p.n - i0);
    const int64_t len = cnt * P;
    // Columns of the whole chunk side by side ([row][i][q]), and dy as
    // (oc, cnt * P), so that one GEMM per group sums over the chunk.
    ForEach(cnt * CK * P, Im2ColF{g, x + i0 * in_img, cols, P, len}, ctx);
    ForEach(cnt * out_img, TransposeDyF{dy + i0 * out_img, dyt, cnt, p.oc, P}, ctx);
    // dW[g] (ocg x K) += dyT[g] (ocg x len) @ cols[g]^T (len x K).
    for (int gi = 0; gi < p.groups; ++gi)
      CudaMath::Gemm<float>(false, true, ocg, K, len, 1.f, dyt + gi * ocg * len, len,
                            cols + gi * K * len, len, i0 == 0 ? 0.f : 1.f, dw + gi * ocg * K, K,
                            ctx);
  }
}

// ---- pooling: one thread per output (forward) or per input (average
// backward); the scan order inside a window is the CPU's ----

namespace {

// Cells of the window starting at start whose positions fall in [lo, hi).
__device__ inline int CountTaps(int start, int kernel, int dil, int lo, int hi) {
  int cnt = 0;
  for (int k = 0; k < kernel; ++k) {
    const int pos = start + k * dil;
    cnt += (pos >= lo && pos < hi);
  }
  return cnt;
}

struct MaxPoolF {
  Geom g;
  const float* x;
  float* y;
  int32_t* argmax;
  __device__ void operator()(int64_t t) const {
    const int ox = t % g.ow, oy = (t / g.ow) % g.oh;
    const int64_t q = t / (int64_t(g.ow) * g.oh);
    const float* plane = x + q * g.h * g.w;
    float best = -INFINITY;
    int32_t arg = -1;
    for (int ki = 0; ki < g.kh; ++ki) {
      const int iy = oy * g.sh - g.pt + ki * g.dh;
      if (iy < 0 || iy >= g.h) continue;
      for (int kj = 0; kj < g.kw; ++kj) {
        const int ix = ox * g.sw - g.pl + kj * g.dw;
        if (ix < 0 || ix >= g.w) continue;
        const float v = plane[iy * g.w + ix];
        // Strict '>' keeps the first maximum; NaN wins, as on the CPU.
        if (v > best || v != v) {
          best = v;
          arg = iy * g.w + ix;
        }
      }
    }
    y[t] = best;
    argmax[t] = arg;
  }
};

struct MaxPoolBackwardF {
  const float* dy;
  const int32_t* argmax;
  float* dx;
  int64_t out_plane, in_plane;
  __device__ void operator()(int64_t t) const {
    const int32_t a = argmax[t];
    if (a >= 0 && a < in_plane) atomicAdd(dx + (t / out_plane) * in_plane + a, dy[t]);
  }
};

struct AvgPoolF {
  Geom g;
  bool include_pad;
  int pb, pr;
  const float* x;
  float* y;
  __device__ int Divisor(int oy, int ox) const {
    const int ylo = include_pad ? -g.pt : 0, yhi = include_pad ? g.h + pb : g.h;
    const int xlo = include_pad ? -g.pl : 0, xhi = include_pad ? g.w + pr : g.w;
    return CountTaps(oy * g.sh - g.pt, g.kh, g.dh, ylo, yhi) *
           CountTaps(ox * g.sw - g.pl, g.kw, g.dw, xlo, xhi);
  }
  __device__ void operator()(int64_t t) const {
    const int ox = t % g.ow, oy = (t / g.ow) % g.oh;
    const int64_t q = t / (int64_t(g.ow) * g.oh);
    const float* plane = x + q * g.h * g.w;
    float acc = 0.f;
    for (int ki = 0; ki < g.kh; ++ki) {
      const int iy = oy * g.sh - g.pt + ki * g.dh;
      if (iy < 0 || iy >= g.h) continue;
      for (int kj = 0; kj < g.kw; ++kj) {
        const int ix = ox * g.sw - g.pl + kj * g.dw;
        if (ix >= 0 && ix < g.w) acc += plane[iy * g.w + ix];
      }
    }
    const int d = Divisor(oy, ox);
    y[t] = d > 0 ? acc / float(d) : 0.f;
  }
};

struct AvgPoolBackwardF {
  AvgPoolF fwd;  // geometry and divisors
  const float* dy;
  float* dx;
  __device__ void operator()(int64_t t) const {
    const Geom& g = fwd.g;
    const int ix = t % g.w, iy = (t / g.w) % g.h;
    const int64_t q = t / (int64_t(g.w) * g.h);
    const float* dplane = dy + q * g.oh * g.ow;
    float acc = 0.f;
    for (int ki = 0; ki < g.kh; ++ki) {
      const int ty = iy + g.pt - ki * g.dh;
      if (ty < 0 || ty % g.sh) continue;
      const int oy = ty / g.sh;
      if (oy >= g.oh) continue;
      for (int kj = 0; kj < g.kw; ++kj) {
        const int tx = ix + g.pl - kj * g.dw;
        if (tx < 0 || tx % g.sw) continue;
        const int ox = tx / g.sw;
        if (ox >= g.ow) continue;
        const int d = fwd.Divisor(oy, ox);
        if (d > 0) acc += dplane[oy * g.ow + ox] / float(d);
      }
    }
    dx[t] = acc;
  }
};

}  // namespace

void MaxPool2dForward(const float* x, float* y, int32_t* argmax, const cpu::PoolParams& p,
                      Context* ctx) {
  const Geom g = PoolGeom(p);
  ForEach(int64_t(p.n) * p.c * g.oh * g.ow, MaxPoolF{g, x, y, argmax}, ctx);
}

void MaxPool2dBackward(const float* dy, const int32_t* argmax, float* dx,
                       const cpu::PoolParams& p, Context* ctx) {
  const Geom g = PoolGeom(p);
  const int64_t in_plane = int64_t(p.h) * p.w, out_plane = int64_t(g.oh) * g.ow;
  const int64_t planes = int64_t(p.n) * p.c;
  SINGA_CUDA_CHECK(
      cudaMemsetAsync(dx, 0, planes * in_plane * sizeof(float), cuda::Stream(ctx)));
  ForEach(planes * out_plane, MaxPoolBackwardF{dy, argmax, dx, out_plane, in_plane}, ctx);
}

void AvgPool2dForward(const float* x, float* y, const cpu::PoolParams& p, Context* ctx) {
  const Geom g = PoolGeom(p);
  ForEach(int64_t(p.n) * p.c * g.oh * g.ow,
          AvgPoolF{g, p.count_include_pad, p.pad_b, p.pad_r, x, y}, ctx);
}

void AvgPool2dBackward(const float* dy, float* dx, const cpu::PoolParams& p, Context* ctx) {
  const Geom g = PoolGeom(p);
  const AvgPoolF fwd{g, p.count_include_pad, p.pad_b, p.pad_r, nullptr, nullptr};
  ForEach(int64_t(p.n) * p.c * p.h * p.w, AvgPoolBackwardF{fwd, dy, dx}, ctx);
}

// ---- batch norm: one block per channel; sums in double, as on the CPU ----

namespace {

constexpr int kBnThreads = 512;

// The block's total of v, returned to every thread.
__device__ double BlockSum(double v) {
  __shared__ double part[32];
  __shared__ double total;
  for (int d = 16; d > 0; d >>= 1) v += __shfl_down_sync(0xffffffffu, v, d);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();  // the previous call's readers are done with part/total
  if (lane == 0) part[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < static_cast<int>(blockDim.x >> 5) ? part[lane] : 0.0;
    for (int d = 16; d > 0; d >>= 1) v += __shfl_down_sync(0xffffffffu, v, d);
    if (lane == 0) total = v;
  }
  __syncthreads();
  return total;
}

// Element e of channel ch: image e / hw, position e % hw.
__device__ inline int64_t BnIndex(int64_t e, int ch, int c, int hw) {
  return ((e / hw) * c + ch) * hw + e % hw;
}

__global__ void BnTrainingKernel(const float* x, const float* scale, const float* bias, float* y,
                                 float* mean_out, float* var_out, int n, int c, int hw,
                                 float eps) {
  const int ch = blockIdx.x;
  const int64_t count = int64_t(n) * hw;
  double sum = 0.0;
  for (int64_t e = threadIdx.x; e < count; e += blockDim.x) sum += x[BnIndex(e, ch, c, hw)];
  const double mean = BlockSum(sum) / double(count);
  const float m = float(mean);
  // A second pass around the mean avoids the cancellation of E[x^2]-E[x]^2.
  double sq = 0.0;
  for (int64_t e = threadIdx.x; e < count; e += blockDim.x) {
    const float d = x[BnIndex(e, ch, c, hw)] - m;
    sq += double(d * d);
  }
  const double var = BlockSum(sq) / double(count);
  const float a = float(double(scale[ch]) / sqrt(var + double(eps)));
  const float b = bias[ch];
  for (int64_t e = threadIdx.x; e < count; e += blockDim.x) {
    const int64_t i = BnIndex(e, ch, c, hw);
    y[i] = (x[i] - m) * a + b;
  }
  if (threadIdx.x == 0) {
    mean_out[ch] = m;
    var_out[ch] = float(var);
  }
}

__global__ void BnBackwardKernel(const float* x, const float* dy, const float* scale,
                                 const float* mean, const float* var, float* dx, float* dscale,
                                 float* dbias, int n, int c, int hw, float eps) {
  const int ch = blockIdx.x;
  const int64_t count = int64_t(n) * hw;
  const float mu = mean[ch];
  double s_dy = 0.0, s_dy_xmu = 0.0;
  for (int64_t e = threadIdx.x; e < count; e += blockDim.x) {
    const int64_t i = BnIndex(e, ch, c, hw);
    s_dy += dy[i];
    s_dy_xmu += double(dy[i] * (x[i] - mu));
  }
  const double sum_dy = BlockSum(s_dy);
  const double sum_dy_xmu = BlockSum(s_dy_xmu);
  const double invstd = 1.0 / sqrt(double(var[ch]) + double(eps));
  // dx = g*invstd * (dy - mean(dy) - xhat * mean(dy*xhat)) as k1*dy + k2*(x - mu) + k3.
  const double k1 = double(scale[ch]) * invstd;
  const double k2 = -k1 * invstd * invstd * sum_dy_xmu / double(count);
  const double k3 = -k1 * sum_dy / double(count);
  const float f1 = float(k1), f2 = float(k2), f3 = float(k3);
  for (int64_t e = threadIdx.x; e < count; e += blockDim.x) {
    const int64_t i = BnIndex(e, ch, c, hw);
    dx[i] = f1 * dy[i] + f2 * (x[i] - mu) + f3;
  }
  if (threadIdx.x == 0) {
    dbias[ch] = float(sum_dy);
    dscale[ch] = float(sum_dy_xmu * invstd);
  }
}

struct BnInferenceF {
  const float *x, *scale, *bias, *mean, *var;
  float* y;
  int c, hw;
  float eps;
  __device__ void operator()(int64_t t) const {
    const int ch = (t / hw) % c;
    const float a = float(double(scale[ch]) / sqrt(double(var[ch]) + double(eps)));
    y[t] = (x[t] - mean[ch]) * a + bias[ch];
  }
};

}  // namespace

void BatchNormForwardTraining(const float* x, const float* scale, const float* bias, float* y,
                              float* mean_out, float* var_out, int n, int c, int hw, float eps,
                              Context* ctx) {
  BnTrainingKernel<<<c, kBnThreads, 0, cuda::Stream(ctx)>>>(x, scale, bias, y, mean_out,
                                                             var_out, n, c, hw, eps);
  SINGA_CUDA_LAUNCHED(BnTrainingKernel);
}

void BatchNormForwardInference(const float* x, const float* scale, const float* bias,
                               const float* running_mean, const float* running_var, float* y,
                               int n, int c, int hw, float eps, Context* ctx) {
  ForEach(int64_t(n) * c * hw,
          BnInferenceF{x, scale, bias, running_mean, running_var, y, c, hw, eps}, ctx);
}

void BatchNormBackward(const float* x, const float* dy, const float* scale, const float* mean,
                       const float* var, float* dx, float* dscale, float* dbias, int n, int c,
                       int hw, float eps, Context* ctx) {
  BnBackwardKernel<<<c, kBnThreads, 0, cuda::Stream(ctx)>>>(x, dy, scale, mean, var, dx, dscale,
                                                             dbias, n, c, hw, eps);
  SINGA_CUDA_LAUNCHED(BnBackwardKernel);
}

}  // namespace gpu
}  // namespace singa
