// 2-D max and average pooling.
//
// Every kernel walks one output row at a time and, for each kernel tap,
// sweeps the whole row of outputs whose tap lands inside the input. That keeps
// the innermost loop long (ow iterations, no bounds checks) so it vectorises,
// instead of the short kh*kw loop that a per-output formulation would have.
#include <algorithm>
#include <climits>
#include <cstddef>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "singa/core/nn_kernels.h"

namespace singa {
namespace cpu {

namespace {

constexpr long kParallelWork = 1L << 15;

// Output positions o in [lo, hi) for which o * s + off lies in [0, in).
inline void ValidRange(int out, int s, int off, int in, int* lo, int* hi) {
  int l = off >= 0 ? 0 : (-off + s - 1) / s;
  int last = in - 1 - off;
  int h = last < 0 ? 0 : last / s + 1;
  l = std::min(l, out);
  h = std::min(h, out);
  *lo = l;
  *hi = std::max(h, l);
}

std::string Describe(const PoolParams& p) {
  std::ostringstream os;
  os << "Pool2d: input [" << p.n << ", " << p.c << ", " << p.h << ", " << p.w
     << "], kernel " << p.kh << "x" << p.kw << ", stride " << p.sh << "x"
     << p.sw << ", dilation " << p.dh << "x" << p.dw << ", pads (t="
     << p.pad_t << ", l=" << p.pad_l << ", b=" << p.pad_b
     << ", r=" << p.pad_r << "), ceil_mode " << p.ceil_mode;
  return os.str();
}

// Number of taps k in [0, kernel) whose position start + k * dil falls in
// [lo, hi).
inline int CountTaps(int start, int kernel, int dil, int lo, int hi) {
  int cnt = 0;
  for (int k = 0; k < kernel; ++k) {
    const int pos = start + k * dil;
    cnt += (pos >= lo && pos < hi);
  }
  return cnt;
}

// Per-axis tap counts for the average-pool divisor. The divisor of output
// (oy, ox) is rows[oy] * cols[ox] because the window is a Cartesian product.
void AvgDivisorFactors(const PoolParams& p, std::vector<int>* rows,
                       std::vector<int>* cols) {
  const int oh = p.oh(), ow = p.ow();
  rows->resize(oh);
  cols->resize(ow);
  const int ylo = p.count_include_pad ? -p.pad_t : 0;
  const int yhi = p.count_include_pad ? p.h + p.pad_b : p.h;
  const int xlo = p.count_include_pad ? -p.pad_l : 0;
  const int xhi = p.count_include_pad ? p.w + p.pad_r : p.w;
  for (int oy = 0; oy < oh; ++oy)
    (*rows)[oy] = CountTaps(oy * p.sh - p.pad_t, p.kh, p.dh, ylo, yhi);
  for (int ox = 0; ox < ow; ++ox)
    (*cols)[ox] = CountTaps(ox * p.sw - p.pad_l, p.kw, p.dw, xlo, xhi);
}

template <bool kArgmax>
void MaxPoolPlane(const float* x, float* y, int32_t* arg,
                  const PoolParams& p, int oh, int ow) {
  const float ninf = -std::numeric_limits<float>::infinity();
  for (int oy = 0; oy < oh; ++oy) {
    float* yr = y + size_t(oy) * ow;
    int32_t* ar = kArgmax ? arg + size_t(oy) * ow : nullptr;
    std::fill(yr, yr + ow, ninf);
    if (kArgmax) std::fill(ar, ar + ow, -1);
    for (int ki = 0; ki < p.kh; ++ki) {
      const int iy = oy * p.sh - p.pad_t + ki * p.dh;
      if (iy < 0 || iy >= p.h) continue;
      for (int kj = 0; kj < p.kw; ++kj) {
        const int offx = kj * p.dw - p.pad_l;
        int lo, hi;
        ValidRange(ow, p.sw, offx, p.w, &lo, &hi);
        const int base = iy * p.w + offx;
        const float* src = x + base;
        const int s = p.sw;
        for (int ox = lo; ox < hi; ++ox) {
          const float v = src[ox * s];
          // Strict '>' keeps the first maximum in scan order; v != v lets NaN
          // win so it propagates, matching PyTorch.
          const bool take = v > yr[ox] || v != v;
          yr[ox] = take ? v : yr[ox];
          if (kArgmax) ar[ox] = take ? base + ox * s : ar[ox];
        }
      }
    }
  }
}

void AvgPoolPlane(const float* x, float* y, const PoolParams& p, int oh,
                  int ow, const std::vector<int>& rows,
                  const std::vector<int>& cols) {
  for (int oy = 0; oy < oh; ++oy) {
    float* yr = y + size_t(oy) * ow;
    std::fill(yr, yr + ow, 0.f);
    for (int ki = 0; ki < p.kh; ++ki) {
      const int iy = oy * p.sh - p.pad_t + ki * p.dh;
      if (iy < 0 || iy >= p.h) continue;
      for (int kj = 0; kj < p.kw; ++kj) {
        const int offx = kj * p.dw - p.pad_l;
        int lo, hi;
        ValidRange(ow, p.sw, offx, p.w, &lo, &hi);
        const float* src = x + size_t(iy) * p.w + offx;
        const int s = p.sw;
        for (int ox = lo; ox < hi; ++ox) yr[ox] += src[ox * s];
      }
    }
    const int ry = rows[oy];
    for (int ox = 0; ox < ow; ++ox) {
      const int d = ry * cols[ox];
      // A window with nothing to count (only possible when it lies wholly in
      // padding with count_include_pad off) averages to zero.
      yr[ox] = d > 0 ? yr[ox] / float(d) : 0.f;
    }
  }
}

void AvgPoolPlaneBackward(const float* dy, float* dx, const PoolParams& p,
                          int oh, int ow, const std::vector<int>& rows,
                          const std::vector<int>& cols, float* g) {
  std::fill(dx, dx + size_t(p.h) * p.w, 0.f);
  for (int oy = 0; oy < oh; ++oy) {
    const float* dr = dy + size_t(oy) * ow;
    const int ry = rows[oy];
    for (int ox = 0; ox < ow; ++ox) {
      const int d = ry * cols[ox];
      g[ox] = d > 0 ? dr[ox] / float(d) : 0.f;
    }
    for (int ki = 0; ki < p.kh; ++ki) {
      const int iy = oy * p.sh - p.pad_t + ki * p.dh;
      if (iy < 0 || iy >= p.h) continue;
      for (int kj = 0; kj < p.kw; ++kj) {
        const int offx = kj * p.dw - p.pad_l;
        int lo, hi;
        ValidRange(ow, p.sw, offx, p.w, &lo, &hi);
        float* dst = dx + size_t(iy) * p.w + offx;
        const int s = p.sw;
        for (int ox = lo; ox < hi; ++ox) dst[ox * s] += g[ox];
      }
    }
  }
}

}  // namespace

int PoolParams::oh() const {
  return WindowOutputSize(h, kh, sh, pad_t, pad_b, dh, ceil_mode);
}

int PoolParams::ow() const {
  return WindowOutputSize(w, kw, sw, pad_l, pad_r, dw, ceil_mode);
}

void PoolParams::Validate() const {
  if (n <= 0 || c <= 0 || h <= 0 || w <= 0 || kh <= 0 || kw <= 0 ||
      sh <= 0 || sw <= 0 || dh <= 0 || dw <= 0)
    throw std::invalid_argument(Describe(*this) +
                                ": all sizes must be positive");
  if (pad_t < 0 || pad_l < 0 || pad_b < 0 || pad_r < 0)
    throw std::invalid_argument(Describe(*this) +
                                ": pads must be non-negative");
  // argmax is an int32 index into one plane.
  if (long(h) * long(w) > long(INT32_MAX))
    throw std::invalid_argument(Describe(*this) +
                                ": plane too large for int32 argmax");
  if (oh() <= 0 || ow() <= 0)
    throw std::invalid_argument(Describe(*this) +
                                ": kernel does not fit, output is empty");
}

void MaxPool2dForward(const float* x, float* y, int32_t* argmax,
                      const PoolParams& p) {
  p.Validate();
  const int oh = p.oh(), ow = p.ow();
  const long planes = long(p.n) * p.c;
  const size_t in_plane = size_t(p.h) * p.w, out_plane = size_t(oh) * ow;
  const long work = planes * long(out_plane) * p.kh * p.kw;
#pragma omp parallel for schedule(static) if (work > kParallelWork)
  for (long q = 0; q < planes; ++q) {
    if (argmax)
      MaxPoolPlane<true>(x + q * in_plane, y + q * out_plane,
                         argmax + q * out_plane, p, oh, ow);
    else
      MaxPoolPlane<false>(x + q * in_plane, y + q * out_plane, nullptr, p, oh,
                          ow);
  }
}

void MaxPool2dBackward(const float* dy, const int32_t* argmax, float* dx,
                       const PoolParams& p) {
  p.Validate();
  const long planes = long(p.n) * p.c;
  const size_t in_plane = size_t(p.h) * p.w;
  const size_t out_plane = size_t(p.oh()) * p.ow();
  const long work = planes * long(in_plane + out_plane);
#pragma omp parallel for schedule(static) if (work > kParallelWork)
  for (long q = 0; q < planes; ++q) {
    float* d = dx + q * in_plane;
    const float* g = dy + q * out_plane;
    const int32_t* a = argmax + q * out_plane;
    std::fill(d, d + in_plane, 0.f);
    for (size_t j = 0; j < out_plane; ++j)
      if (a[j] >= 0) d[a[j]] += g[j];
  }
}

void AvgPool2dForward(const float* x, float* y, const PoolParams& p) {
  p.Validate();
  const int oh = p.oh(), ow = p.ow();
  std::vector<int> rows, cols;
  AvgDivisorFactors(p, &rows, &cols);
  const long planes = long(p.n) * p.c;
  const size_t in_plane = size_t(p.h) * p.w, out_plane = size_t(oh) * ow;
  const long work = planes * long(out_plane) * p.kh * p.kw;
#pragma omp parallel for schedule(static) if (work > kParallelWork)
  for (long q = 0; q < planes; ++q)
    AvgPoolPlane(x + q * in_plane, y + q * out_plane, p, oh, ow, rows, cols);
}

void AvgPool2dBackward(const float* dy, float* dx, const PoolParams& p) {
  p.Validate();
  const int oh = p.oh(), ow = p.ow();
  std::vector<int> rows, cols;
  AvgDivisorFactors(p, &rows, &cols);
  const long planes = long(p.n) * p.c;
  const size_t in_plane = size_t(p.h) * p.w, out_plane = size_t(oh) * ow;
  const long work = planes * long(out_plane) * p.kh * p.kw;
#pragma omp parallel if (work > kParallelWork)
  {
    // Per-row scaled gradients, one scratch row per thread.
    std::vector<float> g(ow);
#pragma omp for schedule(static)
    for (long q = 0; q < planes; ++q)
      AvgPoolPlaneBackward(dy + q * out_plane, dx + q * in_plane, p, oh, ow,
                           rows, cols, g.data());
  }
}

}  // namespace cpu
}  // namespace singa
