// Pooling loops for one ISA family (compiled per family, see cpu_isa.h).
//
// Every kernel walks one output row at a time and, for each kernel tap,
// sweeps the whole row of outputs whose tap lands inside the input. That keeps
// the innermost loop long (ow iterations, no bounds checks) so it vectorises,
// instead of the short kh*kw loop that a per-output formulation would have.
// The 2x2 stride-2 max pool of most CNNs has its own vector loops
// (pool2x2.h).
#include <algorithm>
#include <cstddef>
#include <limits>
#include <type_traits>

#include <omp.h>

#include "isa_vec.h"
#include "nn_isa.h"
#include "pool2x2.h"

#ifndef SINGA_ISA_NS
#error "pool_isa.cc is compiled per ISA: define SINGA_ISA_NS and SINGA_ISA_LEVEL"
#endif

namespace singa {
namespace cpu {
namespace SINGA_ISA_NS {

namespace {

constexpr long kParallelWork = 1L << 15;

// The 2x2 stride-2 loops apply: no padding, no dilation, and every window
// wholly inside the input (ceil mode may add a partial last one).
bool Is2x2(const PoolParams& p, const PoolPlan& pl) {
  return p.kh == 2 && p.kw == 2 && p.sh == 2 && p.sw == 2 && p.dh == 1 &&
         p.dw == 1 && p.pad_t == 0 && p.pad_l == 0 && 2 * pl.oh <= p.h &&
         2 * pl.ow <= p.w;
}

// The generic max-pool backward of one plane: zero, then scatter-add.
// Positions outside the plane (a window with no input is -1) are skipped,
// so an argmax nobody checked (one a recorded graph computes) cannot write
// out of bounds; returns how many lay at or past the plane's end.
size_t MaxPoolPlaneBackward(const float* g, const int32_t* a, float* d,
                            size_t in_plane, size_t out_plane) {
  std::fill(d, d + in_plane, 0.f);
  size_t past = 0;
  for (size_t j = 0; j < out_plane; ++j) {
    if (a[j] < 0) continue;
    if (size_t(a[j]) < in_plane)
      d[a[j]] += g[j];
    else
      ++past;
  }
  return past;
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
                  const PoolPlan& pl) {
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
                  const PoolParams& p, const PoolPlan& pl) {
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
                          const PoolParams& p, const PoolPlan& pl,
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

void MaxPoolForward(const float* x, float* y, int32_t* argmax,
                    const PoolParams& p, const PoolPlan& pl) {
  const long planes = long(p.n) * p.c;
  const size_t in_plane = size_t(p.h) * p.w;
  const size_t out_plane = size_t(pl.oh) * pl.ow;
  const long work = planes * long(out_plane) * p.kh * p.kw;
  if (Is2x2(p, pl)) {
#pragma omp parallel if (work > kParallelWork)
    {
      const long nt = omp_get_num_threads(), t = omp_get_thread_num();
      const long q0 = planes * t / nt, q1 = planes * (t + 1) / nt;
      // The fast pass assumes finite inputs; planes with a NaN or an
      // infinity are redone exactly.
      Strays nan;
      if (argmax)
        MaxPool2x2Pass<true, false>(x, y, argmax, p, pl.oh, pl.ow, q0, q1,
                                    &nan);
      else
        MaxPool2x2Pass<false, false>(x, y, nullptr, p, pl.oh, pl.ow, q0, q1,
                                     &nan);
      if (nan.any()) {
        if (argmax)
          MaxPool2x2Pass<true, true>(x, y, argmax, p, pl.oh, pl.ow, q0, q1,
                                     &nan);
        else
          MaxPool2x2Pass<false, true>(x, y, nullptr, p, pl.oh, pl.ow, q0,
                                      q1, &nan);
      }
    }
    return;
  }
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

size_t MaxPoolBackward(const float* dy, const int32_t* argmax, float* dx,
                       const PoolParams& p, const PoolPlan& pl) {
  const long planes = long(p.n) * p.c;
  const size_t in_plane = size_t(p.h) * p.w;
  const size_t out_plane = size_t(pl.oh) * pl.ow;
  const long work = planes * long(in_plane + out_plane);
  const bool two = Is2x2(p, pl);
  size_t past = 0;
#pragma omp parallel reduction(+ : past) if (work > kParallelWork)
  {
    const long nt = omp_get_num_threads(), t = omp_get_thread_num();
    const long q0 = planes * t / nt, q1 = planes * (t + 1) / nt;
    Strays strays;
    if (two)
      MaxPool2x2Backward(dy, argmax, dx, p, pl.oh, pl.ow, q0, q1, &strays);
    // The fast loop assumed every argmax inside its own window; if one was
    // not, this thread's planes are redone by the general scatter.
    if (!two || strays.any())
      for (long q = q0; q < q1; ++q)
        past += MaxPoolPlaneBackward(dy + q * out_plane, argmax + q * out_plane,
                                     dx + q * in_plane, in_plane, out_plane);
  }
  return past;
}

void AvgPoolForward(const float* x, float* y, const PoolParams& p,
                    const PoolPlan& pl) {
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

void AvgPoolBackward(const float* dy, float* dx, const PoolParams& p,
                     const PoolPlan& pl) {
  const long planes = long(p.n) * p.c;
  const size_t in_plane = size_t(p.h) * p.w;
  const size_t out_plane = size_t(pl.oh) * pl.ow;
  [[maybe_unused]] const long work = planes * long(out_plane) * p.kh * p.kw;
  DispatchStride(p.sw, [&](auto stride) {
    constexpr int S = decltype(stride)::value;
#pragma omp parallel if (work > kParallelWork)
    {
      // Per-row scaled gradients, one scratch row per thread (ow floats on
      // the stack for rows up to 4096 wide, else the heap).
      float small[4096];
      float* g = pl.ow <= 4096 ? small : new float[size_t(pl.ow)];
#pragma omp for schedule(static)
      for (long q = 0; q < planes; ++q)
        AvgPoolPlaneBackward<S>(dy + q * out_plane, dx + q * in_plane, p, pl,
                                g);
      if (g != small) delete[] g;
    }
  });
}

}  // namespace SINGA_ISA_NS
}  // namespace cpu
}  // namespace singa
