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
#include <type_traits>
#include <vector>

#include "singa/core/nn_kernels.h"

#include "window.h"

namespace singa {
namespace cpu {

namespace {

constexpr long kParallelWork = 1L << 15;


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

// Everything about a pooling call that does not depend on the plane,
// computed once instead of per plane and row.
struct Plan {
  int oh, ow;
  // Per kernel column kj: input offset of the tap relative to ox * sw, and
  // the output columns [lo, hi) for which it lands inside the row.
  std::vector<int> off, lo, hi;
  // Average pooling divisor of output (oy, ox) is rows[oy] * cols[ox]: the
  // window is a Cartesian product, so the counted cells factor per axis.
  std::vector<int> rows, cols;
};

Plan MakePlan(const PoolParams& p, bool divisors) {
  Plan pl;
  pl.oh = p.oh();
  pl.ow = p.ow();
  pl.off.resize(p.kw);
  pl.lo.resize(p.kw);
  pl.hi.resize(p.kw);
  for (int kj = 0; kj < p.kw; ++kj) {
    pl.off[kj] = kj * p.dw - p.pad_l;
    ValidRange(pl.ow, p.sw, pl.off[kj], p.w, &pl.lo[kj], &pl.hi[kj]);
  }
  if (!divisors) return pl;
  pl.rows.resize(pl.oh);
  pl.cols.resize(pl.ow);
  const int ylo = p.count_include_pad ? -p.pad_t : 0;
  const int yhi = p.count_include_pad ? p.h + p.pad_b : p.h;
  const int xlo = p.count_include_pad ? -p.pad_l : 0;
  const int xhi = p.count_include_pad ? p.w + p.pad_r : p.w;
  for (int oy = 0; oy < pl.oh; ++oy)
    pl.rows[oy] = CountTaps(oy * p.sh - p.pad_t, p.kh, p.dh, ylo, yhi);
  for (int ox = 0; ox < pl.ow; ++ox)
    pl.cols[ox] = CountTaps(ox * p.sw - p.pad_l, p.kw, p.dw, xlo, xhi);
  return pl;
}

// The horizontal stride is a template parameter (0 = read it at run time)
// because with a known stride of 1 or 2 the compiler turns the strided loads
// of the inner loops into vector loads and shuffles.
template <int S>
inline int Stride(const PoolParams& p) {
  return S > 0 ? S : p.sw;
}

template <int S, bool kArgmax>
void MaxPoolPlane(const float* __restrict x, float* __restrict y,
                  int32_t* __restrict arg, const PoolParams& p,
                  const Plan& pl) {
  const float ninf = -std::numeric_limits<float>::infinity();
  const int s = Stride<S>(p), ow = pl.ow;
  for (int oy = 0; oy < pl.oh; ++oy) {
    float* yr = y + size_t(oy) * ow;
    int32_t* ar = kArgmax ? arg + size_t(oy) * ow : nullptr;
    for (int ox = 0; ox < ow; ++ox) yr[ox] = ninf;
    if (kArgmax)
      for (int ox = 0; ox < ow; ++ox) ar[ox] = -1;
    for (int ki = 0; ki < p.kh; ++ki) {
      const int iy = oy * p.sh - p.pad_t + ki * p.dh;
      if (iy < 0 || iy >= p.h) continue;
      for (int kj = 0; kj < p.kw; ++kj) {
        const int base = iy * p.w + pl.off[kj];
        const float* src = x + base;
        for (int ox = pl.lo[kj]; ox < pl.hi[kj]; ++ox) {
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

template <int S>
void AvgPoolPlane(const float* __restrict x, float* __restrict y,
                  const PoolParams& p, const Plan& pl) {
  const int s = Stride<S>(p), ow = pl.ow;
  for (int oy = 0; oy < pl.oh; ++oy) {
    float* yr = y + size_t(oy) * ow;
    for (int ox = 0; ox < ow; ++ox) yr[ox] = 0.f;
    for (int ki = 0; ki < p.kh; ++ki) {
      const int iy = oy * p.sh - p.pad_t + ki * p.dh;
      if (iy < 0 || iy >= p.h) continue;
      for (int kj = 0; kj < p.kw; ++kj) {
        const float* src = x + size_t(iy) * p.w + pl.off[kj];
        for (int ox = pl.lo[kj]; ox < pl.hi[kj]; ++ox) yr[ox] += src[ox * s];
      }
    }
    const int ry = pl.rows[oy];
    for (int ox = 0; ox < ow; ++ox) {
      const int d = ry * pl.cols[ox];
      // A window with nothing to count (only possible when it lies wholly in
      // padding with count_include_pad off) averages to zero.
      yr[ox] = d > 0 ? yr[ox] / float(d) : 0.f;
    }
  }
}

template <int S>
void AvgPoolPlaneBackward(const float* __restrict dy, float* __restrict dx,
                          const PoolParams& p, const Plan& pl,
                          float* __restrict g) {
  const int s = Stride<S>(p), ow = pl.ow;
  std::fill(dx, dx + size_t(p.h) * p.w, 0.f);
  for (int oy = 0; oy < pl.oh; ++oy) {
    const float* dr = dy + size_t(oy) * ow;
    const int ry = pl.rows[oy];
    for (int ox = 0; ox < ow; ++ox) {
      const int d = ry * pl.cols[ox];
      g[ox] = d > 0 ? dr[ox] / float(d) : 0.f;
    }
    for (int ki = 0; ki < p.kh; ++ki) {
      const int iy = oy * p.sh - p.pad_t + ki * p.dh;
      if (iy < 0 || iy >= p.h) continue;
      for (int kj = 0; kj < p.kw; ++kj) {
        float* dst = dx + size_t(iy) * p.w + pl.off[kj];
        for (int ox = pl.lo[kj]; ox < pl.hi[kj]; ++ox) dst[ox * s] += g[ox];
      }
    }
  }
}

// Calls f(std::integral_constant<int, S>) with S = sw for the strides worth
// specialising, S = 0 otherwise.
template <typename F>
void DispatchStride(int sw, F f) {
  if (sw == 1)
    f(std::integral_constant<int, 1>());
  else if (sw == 2)
    f(std::integral_constant<int, 2>());
  else
    f(std::integral_constant<int, 0>());
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
  const Plan pl = MakePlan(p, false);
  const long planes = long(p.n) * p.c;
  const size_t in_plane = size_t(p.h) * p.w;
  const size_t out_plane = size_t(pl.oh) * pl.ow;
  [[maybe_unused]] const long work = planes * long(out_plane) * p.kh * p.kw;
  DispatchStride(p.sw, [&](auto stride) {
    constexpr int S = decltype(stride)::value;
#pragma omp parallel for schedule(static) if (work > kParallelWork)
    for (long q = 0; q < planes; ++q) {
      if (argmax)
        MaxPoolPlane<S, true>(x + q * in_plane, y + q * out_plane,
                              argmax + q * out_plane, p, pl);
      else
        MaxPoolPlane<S, false>(x + q * in_plane, y + q * out_plane, nullptr,
                               p, pl);
    }
  });
}

void MaxPool2dBackward(const float* dy, const int32_t* argmax, float* dx,
                       const PoolParams& p) {
  p.Validate();
  if (!argmax)
    throw std::invalid_argument(
        Describe(p) + ": MaxPool2dBackward needs the argmax of the forward");
  const long planes = long(p.n) * p.c;
  const size_t in_plane = size_t(p.h) * p.w;
  const size_t out_plane = size_t(p.oh()) * p.ow();
  [[maybe_unused]] const long work = planes * long(in_plane + out_plane);
#pragma omp parallel for schedule(static) if (work > kParallelWork)
  for (long q = 0; q < planes; ++q) {
    float* d = dx + q * in_plane;
    const float* g = dy + q * out_plane;
    const int32_t* a = argmax + q * out_plane;
    std::fill(d, d + in_plane, 0.f);
    // Positions outside the plane (a window with no input is -1) are
    // skipped: an argmax the caller could not check (one a recorded graph
    // computes) must not write out of bounds.
    for (size_t j = 0; j < out_plane; ++j)
      if (a[j] >= 0 && size_t(a[j]) < in_plane) d[a[j]] += g[j];
  }
}

void AvgPool2dForward(const float* x, float* y, const PoolParams& p) {
  p.Validate();
  const Plan pl = MakePlan(p, true);
  const long planes = long(p.n) * p.c;
  const size_t in_plane = size_t(p.h) * p.w;
  const size_t out_plane = size_t(pl.oh) * pl.ow;
  [[maybe_unused]] const long work = planes * long(out_plane) * p.kh * p.kw;
  DispatchStride(p.sw, [&](auto stride) {
    constexpr int S = decltype(stride)::value;
#pragma omp parallel for schedule(static) if (work > kParallelWork)
    for (long q = 0; q < planes; ++q)
      AvgPoolPlane<S>(x + q * in_plane, y + q * out_plane, p, pl);
  });
}

void AvgPool2dBackward(const float* dy, float* dx, const PoolParams& p) {
  p.Validate();
  const Plan pl = MakePlan(p, true);
  const long planes = long(p.n) * p.c;
  const size_t in_plane = size_t(p.h) * p.w;
  const size_t out_plane = size_t(pl.oh) * pl.ow;
  [[maybe_unused]] const long work = planes * long(out_plane) * p.kh * p.kw;
  DispatchStride(p.sw, [&](auto stride) {
    constexpr int S = decltype(stride)::value;
#pragma omp parallel if (work > kParallelWork)
    {
      // Per-row scaled gradients, one scratch row per thread.
      std::vector<float> g(pl.ow);
#pragma omp for schedule(static)
      for (long q = 0; q < planes; ++q)
        AvgPoolPlaneBackward<S>(dy + q * out_plane, dx + q * in_plane, p, pl,
                                g.data());
    }
  });
}

}  // namespace cpu
}  // namespace singa
