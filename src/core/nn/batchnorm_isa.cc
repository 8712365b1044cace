// Batch normalisation over NCHW with per-channel statistics, for one ISA
// family (compiled per family, see cpu_isa.h; batchnorm_cpp.cc checks the
// arguments).
//
// A channel's values are n strided segments of hw contiguous floats. Each
// segment is reduced in float with a vectorised reduction and the segment
// results are added in double, which keeps the sums accurate for large
// batches without giving up SIMD on the long inner loop. The elementwise
// passes are folded into one short fused expression per element.
#include <cmath>
#include <cstddef>

#include "nn_isa.h"

#ifndef SINGA_ISA_NS
#error "batchnorm_isa.cc is compiled per ISA: define SINGA_ISA_NS"
#endif

namespace singa {
namespace cpu {
namespace SINGA_ISA_NS {

namespace {

constexpr long kParallelWork = 1L << 15;

inline float SegmentSum(const float* s, int len) {
  float acc = 0.f;
#pragma omp simd reduction(+ : acc)
  for (int j = 0; j < len; ++j) acc += s[j];
  return acc;
}

inline float SegmentSquaredDev(const float* s, int len, float mean) {
  float acc = 0.f;
#pragma omp simd reduction(+ : acc)
  for (int j = 0; j < len; ++j) {
    const float d = s[j] - mean;
    acc += d * d;
  }
  return acc;
}

inline float SegmentDotDev(const float* dy, const float* x, int len,
                           float mean) {
  float acc = 0.f;
#pragma omp simd reduction(+ : acc)
  for (int j = 0; j < len; ++j) acc += dy[j] * (x[j] - mean);
  return acc;
}

// y = (x - m) * a + b over the channel's n segments. Centring first keeps
// precision when |mean| is large compared with the spread of x.
inline void Normalize(const float* x, float* y, int n, int c, int hw, int ch,
                      float m, float a, float b) {
  for (int i = 0; i < n; ++i) {
    const size_t off = (size_t(i) * c + ch) * hw;
    const float* s = x + off;
    float* d = y + off;
    for (int j = 0; j < hw; ++j) d[j] = (s[j] - m) * a + b;
  }
}

}  // namespace

void BatchNormForwardTraining(const float* x, const float* scale,
                              const float* bias, float* y, float* mean_out,
                              float* var_out, int n, int c, int hw,
                              float eps) {
  const double count = double(n) * hw;
  [[maybe_unused]] const long work = long(n) * c * hw;
#pragma omp parallel for schedule(static) if (work > kParallelWork)
  for (int ch = 0; ch < c; ++ch) {
    double sum = 0.0;
    for (int i = 0; i < n; ++i)
      sum += SegmentSum(x + (size_t(i) * c + ch) * hw, hw);
    const double mean = sum / count;
    // Second pass around the mean avoids the cancellation of E[x^2]-E[x]^2.
    double sq = 0.0;
    for (int i = 0; i < n; ++i)
      sq += SegmentSquaredDev(x + (size_t(i) * c + ch) * hw, hw, float(mean));
    const double var = sq / count;
    const double a = double(scale[ch]) / std::sqrt(var + double(eps));
    Normalize(x, y, n, c, hw, ch, float(mean), float(a), bias[ch]);
    mean_out[ch] = float(mean);
    var_out[ch] = float(var);
  }
}

void BatchNormForwardInference(const float* x, const float* scale,
                               const float* bias, const float* running_mean,
                               const float* running_var, float* y, int n,
                               int c, int hw, float eps) {
  [[maybe_unused]] const long work = long(n) * c * hw;
#pragma omp parallel for schedule(static) if (work > kParallelWork)
  for (int ch = 0; ch < c; ++ch) {
    const double a =
        double(scale[ch]) / std::sqrt(double(running_var[ch]) + double(eps));
    Normalize(x, y, n, c, hw, ch, running_mean[ch], float(a), bias[ch]);
  }
}

void BatchNormBackward(const float* x, const float* dy, const float* scale,
                       const float* mean, const float* var, float* dx,
                       float* dscale, float* dbias, int n, int c, int hw,
                       float eps) {
  const double count = double(n) * hw;
  [[maybe_unused]] const long work = long(n) * c * hw;
#pragma omp parallel for schedule(static) if (work > kParallelWork)
  for (int ch = 0; ch < c; ++ch) {
    const float mu = mean[ch];
    double sum_dy = 0.0, sum_dy_xmu = 0.0;
    for (int i = 0; i < n; ++i) {
      const size_t off = (size_t(i) * c + ch) * hw;
      sum_dy += SegmentSum(dy + off, hw);
      sum_dy_xmu += SegmentDotDev(dy + off, x + off, hw, mu);
    }
    const double invstd = 1.0 / std::sqrt(double(var[ch]) + double(eps));
    // dx = g*invstd * (dy - mean(dy) - xhat * mean(dy*xhat)), regrouped as
    // k1*dy + k2*(x - mu) + k3 so the last pass is one fused expression.
    const double k1 = double(scale[ch]) * invstd;
    const double k2 = -k1 * invstd * invstd * sum_dy_xmu / count;
    const double k3 = -k1 * sum_dy / count;
    const float f1 = float(k1), f2 = float(k2), f3 = float(k3);
    for (int i = 0; i < n; ++i) {
      const size_t off = (size_t(i) * c + ch) * hw;
      const float* g = dy + off;
      const float* s = x + off;
      float* d = dx + off;
      for (int j = 0; j < hw; ++j) d[j] = f1 * g[j] + f2 * (s[j] - mu) + f3;
    }
    dbias[ch] = float(sum_dy);
    dscale[ch] = float(sum_dy_xmu * invstd);
  }
}

}  // namespace SINGA_ISA_NS
}  // namespace cpu
}  // namespace singa
