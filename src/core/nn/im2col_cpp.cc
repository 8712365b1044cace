// im2col / col2im for one image (nn_kernels.h). The convolution kernels do
// not use them (conv_engine.h reads the windows in place); they stay as a
// public utility and as the reference layout the tests check.
#ifdef _OPENMP
#include <omp.h>
#endif

#include <algorithm>
#include <cstddef>
#include <sstream>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include "singa/core/nn_kernels.h"

#include "window.h"

namespace singa {
namespace cpu {

namespace {

// Below this many floats of work, thread start-up costs more than it saves.
constexpr long kParallelWork = 1L << 15;

// Short contiguous runs (a feature-map row is often 8-24 floats) are where
// im2col/col2im spend their time. A plain loop would either pay a vector
// prologue/epilogue per row or be turned into a memcpy/memset call by the
// compiler; fixed 8- and 4-float blocks plus an unrolled tail of at most
// three elements compile to a handful of straight-line vector moves.
template <typename Op>
inline void ForRun(int n, Op op) {
  int i = 0;
  for (; i + 8 <= n; i += 8) op(i, std::integral_constant<int, 8>());
  if (i + 4 <= n) {
    op(i, std::integral_constant<int, 4>());
    i += 4;
  }
  switch (n - i) {
    case 3: op(i + 2, std::integral_constant<int, 1>()); [[fallthrough]];
    case 2: op(i + 1, std::integral_constant<int, 1>()); [[fallthrough]];
    case 1: op(i, std::integral_constant<int, 1>()); break;
    default: break;
  }
}

inline void CopyRun(const float* __restrict s, float* __restrict d, int n) {
  ForRun(n, [=](int i, auto width) {
    constexpr int kW = decltype(width)::value;
    float t[kW];
    for (int l = 0; l < kW; ++l) t[l] = s[i + l];
    for (int l = 0; l < kW; ++l) d[i + l] = t[l];
  });
}

inline void AddRun(const float* __restrict s, float* __restrict d, int n) {
  ForRun(n, [=](int i, auto width) {
    constexpr int kW = decltype(width)::value;
    float t[kW];
    for (int l = 0; l < kW; ++l) t[l] = d[i + l] + s[i + l];
    for (int l = 0; l < kW; ++l) d[i + l] = t[l];
  });
}

inline void ZeroRun(float* __restrict d, int n) {
  ForRun(n, [=](int i, auto width) {
    constexpr int kW = decltype(width)::value;
    for (int l = 0; l < kW; ++l) d[i + l] = 0.f;
  });
}

struct Geometry {
  int h, w, kh, kw, pad_t, pad_l, sh, sw, dh, dw, oh, ow;
  // For each kernel row ki (column kj), the output rows [ylo, yhi) (columns
  // [xlo, xhi)) whose tap lands inside the image. Computed once per call:
  // the integer divisions behind them would otherwise be paid per channel.
  std::vector<int> ylo, yhi, xlo, xhi;
};

// Unfolds output rows [oy0, oy1) of one channel plane into kh*kw rows of col,
// `ld` floats apart; each holds (oy1 - oy0) * ow values. Output rows whose
// input row is padding are zeroed in bulk, so the per-row loop only copies.
void Im2ColChannel(const float* __restrict plane, const Geometry& g, int oy0,
                   int oy1, float* __restrict col, size_t ld) {
  const int ow = g.ow, s = g.sw;
  const size_t rstep = size_t(g.sh) * g.w;
  for (int ki = 0; ki < g.kh; ++ki) {
    const int offy = ki * g.dh - g.pad_t;
    const int ylo = std::clamp(g.ylo[ki], oy0, oy1);
    const int yhi = std::clamp(g.yhi[ki], ylo, oy1);
    for (int kj = 0; kj < g.kw; ++kj) {
      float* dst = col + size_t(ki * g.kw + kj) * ld;
      const int offx = kj * g.dw - g.pad_l;
      const int xlo = g.xlo[kj], xhi = g.xhi[kj];
      ZeroRun(dst, (ylo - oy0) * ow);
      ZeroRun(dst + size_t(yhi - oy0) * ow, (oy1 - yhi) * ow);
      const float* src = plane + ptrdiff_t(ylo * g.sh + offy) * g.w + offx;
      float* d = dst + size_t(ylo - oy0) * ow;
      if (s == 1 && xlo == 0 && xhi == ow) {
        for (int oy = ylo; oy < yhi; ++oy, src += rstep, d += ow)
          CopyRun(src, d, ow);
        continue;
      }
      for (int oy = ylo; oy < yhi; ++oy, src += rstep, d += ow) {
        ZeroRun(d, xlo);
        if (s == 1) {
          CopyRun(src + xlo, d + xlo, xhi - xlo);
        } else {
          for (int ox = xlo; ox < xhi; ++ox) d[ox] = src[ox * s];
        }
        ZeroRun(d + xhi, ow - xhi);
      }
    }
  }
}

// Adjoint of Im2ColChannel: adds every column entry of output rows
// [oy0, oy1) back onto the pixel it was read from. With `zero` the plane is
// cleared first.
void Col2ImChannel(const float* __restrict col, const Geometry& g, size_t ld,
                   int oy0, int oy1, bool zero, float* __restrict plane) {
  const int ow = g.ow, s = g.sw;
  const size_t rstep = size_t(g.sh) * g.w;
  if (zero) ZeroRun(plane, g.h * g.w);
  for (int ki = 0; ki < g.kh; ++ki) {
    const int offy = ki * g.dh - g.pad_t;
    const int ylo = std::clamp(g.ylo[ki], oy0, oy1);
    const int yhi = std::clamp(g.yhi[ki], ylo, oy1);
    for (int kj = 0; kj < g.kw; ++kj) {
      const int offx = kj * g.dw - g.pad_l;
      const int xlo = g.xlo[kj], xhi = g.xhi[kj];
      const float* src =
          col + size_t(ki * g.kw + kj) * ld + size_t(ylo - oy0) * ow;
      float* d = plane + ptrdiff_t(ylo * g.sh + offy) * g.w + offx;
      if (s == 1) {
        for (int oy = ylo; oy < yhi; ++oy, src += ow, d += rstep)
          AddRun(src + xlo, d + xlo, xhi - xlo);
      } else {
        for (int oy = ylo; oy < yhi; ++oy, src += ow, d += rstep)
          for (int ox = xlo; ox < xhi; ++ox) d[ox * s] += src[ox];
      }
    }
  }
}

Geometry MakeGeometry(int h, int w, int kh, int kw, int pad_t, int pad_l,
                      int pad_b, int pad_r, int sh, int sw, int dh, int dw) {
  Geometry g{h, w, kh, kw, pad_t, pad_l, sh, sw, dh, dw, 0, 0, {}, {}, {}, {}};
  g.oh = WindowOutputSize(h, kh, sh, pad_t, pad_b, dh);
  g.ow = WindowOutputSize(w, kw, sw, pad_l, pad_r, dw);
  g.ylo.resize(kh);
  g.yhi.resize(kh);
  g.xlo.resize(kw);
  g.xhi.resize(kw);
  for (int ki = 0; ki < kh; ++ki)
    ValidRange(g.oh, sh, ki * dh - pad_t, h, &g.ylo[ki], &g.yhi[ki]);
  for (int kj = 0; kj < kw; ++kj)
    ValidRange(g.ow, sw, kj * dw - pad_l, w, &g.xlo[kj], &g.xhi[kj]);
  return g;
}

void CheckIm2ColArgs(const char* fn, int c, int h, int w, int kh, int kw,
                     int pad_t, int pad_l, int pad_b, int pad_r, int sh,
                     int sw, int dh, int dw) {
  std::ostringstream os;
  os << fn << ": image (c=" << c << ", h=" << h << ", w=" << w
     << "), kernel " << kh << "x" << kw << ", stride " << sh << "x" << sw
     << ", dilation " << dh << "x" << dw << ", pads (t=" << pad_t
     << ", l=" << pad_l << ", b=" << pad_b << ", r=" << pad_r << ")";
  if (c <= 0 || h <= 0 || w <= 0 || kh <= 0 || kw <= 0 || sh <= 0 ||
      sw <= 0 || dh <= 0 || dw <= 0)
    throw std::invalid_argument(os.str() + ": sizes must be positive");
  if (pad_t < 0 || pad_l < 0 || pad_b < 0 || pad_r < 0)
    throw std::invalid_argument(os.str() + ": pads must be non-negative");
  if (WindowOutputSize(h, kh, sh, pad_t, pad_b, dh) <= 0 ||
      WindowOutputSize(w, kw, sw, pad_l, pad_r, dw) <= 0)
    throw std::invalid_argument(os.str() + ": output would be empty");
}

}  // namespace

int WindowOutputSize(int in, int k, int stride, int pad_begin, int pad_end,
                     int dilation, bool ceil_mode) {
  const long extent = long(dilation) * (k - 1) + 1;
  const long span = long(in) + pad_begin + pad_end;
  if (stride <= 0 || span < extent) return 0;
  const long room = span - extent;
  long out = (ceil_mode ? (room + stride - 1) / stride : room / stride) + 1;
  // A window that would start past the input and its leading padding covers
  // only trailing padding; ONNX and PyTorch drop it.
  if (ceil_mode && (out - 1) * stride >= long(in) + pad_begin) --out;
  return int(out);
}

void Im2Col(const float* im, int c, int h, int w, int kh, int kw, int pad_t,
            int pad_l, int pad_b, int pad_r, int sh, int sw, int dh, int dw,
            float* col) {
  CheckIm2ColArgs("Im2Col", c, h, w, kh, kw, pad_t, pad_l, pad_b, pad_r, sh,
                  sw, dh, dw);
  const Geometry g =
      MakeGeometry(h, w, kh, kw, pad_t, pad_l, pad_b, pad_r, sh, sw, dh, dw);
  const size_t N = size_t(g.oh) * g.ow;
  const size_t kk = size_t(kh) * kw;
  [[maybe_unused]] const long work = long(c) * long(kk * N);
#pragma omp parallel for schedule(static) if (work > kParallelWork)
  for (int ci = 0; ci < c; ++ci)
    Im2ColChannel(im + size_t(ci) * h * w, g, 0, g.oh, col + ci * kk * N, N);
}

void Col2Im(const float* col, int c, int h, int w, int kh, int kw, int pad_t,
            int pad_l, int pad_b, int pad_r, int sh, int sw, int dh, int dw,
            float* im) {
  CheckIm2ColArgs("Col2Im", c, h, w, kh, kw, pad_t, pad_l, pad_b, pad_r, sh,
                  sw, dh, dw);
  const Geometry g =
      MakeGeometry(h, w, kh, kw, pad_t, pad_l, pad_b, pad_r, sh, sw, dh, dw);
  const size_t N = size_t(g.oh) * g.ow;
  const size_t kk = size_t(kh) * kw;
  [[maybe_unused]] const long work = long(c) * long(kk * N);
#pragma omp parallel for schedule(static) if (work > kParallelWork)
  for (int ci = 0; ci < c; ++ci)
    Col2ImChannel(col + ci * kk * N, g, N, 0, g.oh, true,
                  im + size_t(ci) * h * w);
}

}  // namespace cpu
}  // namespace singa
