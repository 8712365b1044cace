// Convolution as im2col + GEMM.
//
// Several images are unfolded side by side into one column matrix
// [c*kh*kw, nb*oh*ow] so that each group needs a single, well-shaped GEMM per
// tile instead of many skinny per-image ones; for the small feature maps of
// typical CNNs this is what keeps OpenBLAS near its peak. The GEMM result is
// laid out [oc, nb*oh*ow] and is scattered back to NCHW together with the
// bias, which costs one pass over the output. An image too large for the
// column budget is instead split into bands of output rows, so memory stays
// bounded whatever the input size.
#ifdef _OPENMP
#include <omp.h>
#endif

#include <algorithm>
#include <cstddef>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "singa/core/blas.h"
#include "singa/core/nn_kernels.h"

#include "window.h"

namespace singa {
namespace cpu {

namespace {

// Upper bound on the column buffer of one tile, in floats (8 MiB). Wide
// enough to give the GEMM a long N; beyond this, measurements on LeNet-sized
// layers showed no further gain, only more memory.
constexpr size_t kColBudget = size_t(1) << 21;

// Below this many floats of work, thread start-up costs more than it saves.
constexpr long kParallelWork = 1L << 15;

#ifdef _OPENMP
inline int MaxThreads() { return omp_get_max_threads(); }
inline int ThreadId() { return omp_get_thread_num(); }
inline int TeamSize() { return omp_get_num_threads(); }
#else
inline int MaxThreads() { return 1; }
inline int ThreadId() { return 0; }
inline int TeamSize() { return 1; }
#endif

// Reused between calls so training loops do not pay for a fresh allocation
// (and page faults) on every step.
struct Workspace {
  std::vector<float> col;
  std::vector<float> mat;
  std::vector<float> tr;
};

Workspace& ThreadWorkspace() {
  thread_local Workspace ws;
  return ws;
}

float* Reserve(std::vector<float>* v, size_t n) {
  if (v->size() < n) v->resize(n);
  return v->data();
}


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

std::string Describe(const ConvParams& p) {
  std::ostringstream os;
  os << "Conv2d: input [" << p.n << ", " << p.c << ", " << p.h << ", "
     << p.w << "], weight [" << p.oc << ", "
     << (p.groups > 0 ? p.c / p.groups : 0) << ", " << p.kh << ", " << p.kw
     << "], groups " << p.groups << ", stride " << p.sh << "x" << p.sw
     << ", dilation " << p.dh << "x" << p.dw << ", pads (t=" << p.pad_t
     << ", l=" << p.pad_l << ", b=" << p.pad_b << ", r=" << p.pad_r << ")";
  return os.str();
}

// A 1x1 kernel with unit stride and no padding reads the image itself as the
// column matrix, so im2col can be skipped.
bool IsPointwise(const ConvParams& p) {
  return p.kh == 1 && p.kw == 1 && p.sh == 1 && p.sw == 1 && p.pad_t == 0 &&
         p.pad_l == 0 && p.pad_b == 0 && p.pad_r == 0;
}

// Everything the tiled drivers share about one convolution.
struct ConvShape {
  Geometry g;
  size_t N;       // output pixels per image
  int G, cg, mg;  // groups, input / output channels per group
  int K;          // column rows per group
  size_t kk;      // kernel taps
  int images;     // images per tile
  int rows;       // output rows per tile (oh unless one image is split)
};

ConvShape MakeShape(const ConvParams& p) {
  ConvShape s;
  s.g = MakeGeometry(p.h, p.w, p.kh, p.kw, p.pad_t, p.pad_l, p.pad_b, p.pad_r,
                     p.sh, p.sw, p.dh, p.dw);
  s.N = size_t(s.g.oh) * s.g.ow;
  s.G = p.groups;
  s.cg = p.c / p.groups;
  s.mg = p.oc / p.groups;
  s.K = s.cg * p.kh * p.kw;
  s.kk = size_t(p.kh) * p.kw;
  const size_t col_rows = size_t(p.c) * s.kk;
  const size_t per_image = col_rows * s.N;
  s.images = int(std::clamp<size_t>(kColBudget / per_image, 1, size_t(p.n)));
  s.rows = s.g.oh;
  if (per_image > kColBudget)
    s.rows = int(std::clamp<size_t>(kColBudget / (col_rows * s.g.ow), 1,
                                    size_t(s.g.oh)));
  return s;
}

// Images [b0, b0 + nb) and output rows [oy0, oy1) of each; several images
// only ever come with all their rows.
struct Tile {
  int b0, nb, oy0, oy1;
  size_t per_image(const ConvShape& s) const {
    return size_t(oy1 - oy0) * s.g.ow;
  }
  size_t cols(const ConvShape& s) const { return nb * per_image(s); }
};

template <typename Body>
void ForEachTile(const ConvParams& p, const ConvShape& s, Body body) {
  for (int b0 = 0; b0 < p.n; b0 += s.images)
    for (int oy0 = 0; oy0 < s.g.oh; oy0 += s.rows)
      body(Tile{b0, std::min(s.images, p.n - b0), oy0,
                std::min(s.g.oh, oy0 + s.rows)});
}

// Fills col [c*kh*kw, t.cols()] for the tile.
void TileIm2Col(const float* x, const ConvParams& p, const ConvShape& s,
                const Tile& t, float* col) {
  const size_t plane = size_t(p.h) * p.w;
  const size_t T = t.per_image(s), L = t.cols(s);
  const long tasks = long(t.nb) * p.c;
#pragma omp parallel for schedule(static) \
    if (tasks * long(s.kk * T) > kParallelWork)
  for (long q = 0; q < tasks; ++q) {
    const int i = int(q / p.c);
    const int ci = int(q % p.c);
    Im2ColChannel(x + (size_t(t.b0 + i) * p.c + ci) * plane, s.g, t.oy0,
                  t.oy1, col + ci * s.kk * L + i * T, L);
  }
}

// The tile's part of an [n, oc, oh, ow] tensor as one [oc, cols] matrix:
// read in place for a single image (rows `N` apart), else gathered into mat.
const float* TileOutputMatrix(const float* dy, const ConvParams& p,
                              const ConvShape& s, const Tile& t, float* mat,
                              size_t* ld) {
  if (t.nb == 1) {
    *ld = s.N;
    return dy + size_t(t.b0) * p.oc * s.N + size_t(t.oy0) * s.g.ow;
  }
  const size_t N = s.N, L = t.cols(s);
  const long tasks = long(t.nb) * p.oc;
#pragma omp parallel for schedule(static) if (tasks * long(N) > kParallelWork)
  for (long q = 0; q < tasks; ++q) {
    const int i = int(q / p.oc);
    const int m = int(q % p.oc);
    CopyRun(dy + (size_t(t.b0 + i) * p.oc + m) * N, mat + m * L + i * N,
            int(N));
  }
  *ld = L;
  return mat;
}

// dst[c][r] (+)= src[r][c] for src [rows, cols], in cache-sized tiles so
// neither side is walked with a large stride for long.
void TransposeInto(const float* src, int rows, int cols, bool accumulate,
                   float* dst) {
  constexpr int kTile = 32;
  [[maybe_unused]] const long work = long(rows) * cols;
#pragma omp parallel for schedule(static) if (work > kParallelWork)
  for (int c0 = 0; c0 < cols; c0 += kTile) {
    const int c1 = std::min(cols, c0 + kTile);
    for (int r0 = 0; r0 < rows; r0 += kTile) {
      const int r1 = std::min(rows, r0 + kTile);
      for (int c = c0; c < c1; ++c) {
        float* d = dst + size_t(c) * rows;
        if (accumulate) {
          for (int r = r0; r < r1; ++r) d[r] += src[size_t(r) * cols + c];
        } else {
          for (int r = r0; r < r1; ++r) d[r] = src[size_t(r) * cols + c];
        }
      }
    }
  }
}

// C[x][y] += sum_{j < len} a[x][j] * b[y][j] for a TM x TN tile. The 16-lane
// accumulators stay in vector registers, so every pair of loaded vectors
// feeds several FMAs.
template <int TM, int TN>
inline void DotTile(const float* __restrict a, size_t lda,
                    const float* __restrict b, size_t ldb, int len,
                    float* __restrict c, int ldc) {
  float acc[TM][TN][16] = {};
  int j = 0;
  for (; j + 16 <= len; j += 16) {
#pragma GCC unroll 4
    for (int x = 0; x < TM; ++x)
#pragma GCC unroll 4
      for (int y = 0; y < TN; ++y)
#pragma omp simd
        for (int l = 0; l < 16; ++l)
          acc[x][y][l] += a[x * lda + j + l] * b[y * ldb + j + l];
  }
  for (int x = 0; x < TM; ++x)
    for (int y = 0; y < TN; ++y) {
      float sum = 0.f;
      for (int l = 0; l < 16; ++l) sum += acc[x][y][l];
      for (int r = j; r < len; ++r) sum += a[x * lda + r] * b[y * ldb + r];
      c[x * ldc + y] += sum;
    }
}

template <int TM>
inline void DotTileRows(int tn, const float* a, size_t lda, const float* b,
                        size_t ldb, int len, float* c, int ldc) {
  switch (tn) {
    case 4: DotTile<TM, 4>(a, lda, b, ldb, len, c, ldc); break;
    case 3: DotTile<TM, 3>(a, lda, b, ldb, len, c, ldc); break;
    case 2: DotTile<TM, 2>(a, lda, b, ldb, len, c, ldc); break;
    default: DotTile<TM, 1>(a, lda, b, ldb, len, c, ldc); break;
  }
}

// Whether the weight gradient of one group (an m x k result reduced over
// `len` columns) is better done by LongReductionNT than by sgemm: OpenBLAS
// splits work over the output only, which leaves threads idle when the
// output is tiny and the reduction long (first conv layers, depthwise).
bool UseLongReduction(int m, int k, size_t len) {
  return long(m) * k <= 2048 && len >= 4096;
}

// For every group g: dw_g (+)= a_g * b_g^T, with a_g = a + g*m*lda ([m, len])
// and b_g = b + g*k*ldb ([k, len]). The reduction axis is split across
// threads; partial results are summed in thread order so the result does not
// depend on scheduling.
void LongReductionNT(int groups, int m, int k, size_t len, const float* a,
                     size_t lda, const float* b, size_t ldb, bool accumulate,
                     float* dw) {
  constexpr int kBlock = 2048;
  const size_t out = size_t(groups) * m * k;
  const long blocks = long((len + kBlock - 1) / kBlock);
  const int threads = MaxThreads();
  std::vector<float> partial(size_t(threads) * out, 0.f);
  int used = 1;
#pragma omp parallel num_threads(threads) if (threads > 1 && blocks > 1)
  {
#pragma omp single
    used = TeamSize();
    float* mine = partial.data() + size_t(ThreadId()) * out;
#pragma omp for schedule(static)
    for (long blk = 0; blk < blocks; ++blk) {
      const size_t j0 = size_t(blk) * kBlock;
      const int n = int(std::min<size_t>(kBlock, len - j0));
      for (int g = 0; g < groups; ++g) {
        const float* ag = a + size_t(g) * m * lda + j0;
        const float* bg = b + size_t(g) * k * ldb + j0;
        float* cg = mine + size_t(g) * m * k;
        for (int x = 0; x < m; x += 4)
          for (int y = 0; y < k; y += 4) {
            const int tm = std::min(4, m - x), tn = std::min(4, k - y);
            const float* ax = ag + size_t(x) * lda;
            const float* by = bg + size_t(y) * ldb;
            float* c = cg + size_t(x) * k + y;
            switch (tm) {
              case 4: DotTileRows<4>(tn, ax, lda, by, ldb, n, c, k); break;
              case 3: DotTileRows<3>(tn, ax, lda, by, ldb, n, c, k); break;
              case 2: DotTileRows<2>(tn, ax, lda, by, ldb, n, c, k); break;
              default: DotTileRows<1>(tn, ax, lda, by, ldb, n, c, k); break;
            }
          }
      }
    }
  }
  for (size_t i = 0; i < out; ++i) {
    float sum = accumulate ? dw[i] : 0.f;
    for (int t = 0; t < used; ++t) sum += partial[size_t(t) * out + i];
    dw[i] = sum;
  }
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

int ConvParams::oh() const {
  return WindowOutputSize(h, kh, sh, pad_t, pad_b, dh);
}

int ConvParams::ow() const {
  return WindowOutputSize(w, kw, sw, pad_l, pad_r, dw);
}

void ConvParams::Validate() const {
  if (n <= 0 || c <= 0 || h <= 0 || w <= 0 || oc <= 0 || kh <= 0 ||
      kw <= 0 || sh <= 0 || sw <= 0 || dh <= 0 || dw <= 0 || groups <= 0)
    throw std::invalid_argument(Describe(*this) +
                                ": all sizes must be positive");
  if (pad_t < 0 || pad_l < 0 || pad_b < 0 || pad_r < 0)
    throw std::invalid_argument(Describe(*this) +
                                ": pads must be non-negative");
  if (c % groups != 0 || oc % groups != 0)
    throw std::invalid_argument(Describe(*this) + ": groups " +
                                std::to_string(groups) +
                                " must divide both input channels " +
                                std::to_string(c) + " and output channels " +
                                std::to_string(oc));
  if (oh() <= 0 || ow() <= 0)
    throw std::invalid_argument(Describe(*this) +
                                ": kernel does not fit, output is empty");
}

void Conv2dForward(const float* x, const float* w, const float* b, float* y,
                   const ConvParams& p) {
  p.Validate();
  UseOpenMPForBlas();
  const ConvShape s = MakeShape(p);
  const size_t N = s.N;
  const int G = s.G, cg = s.cg, mg = s.mg, K = s.K;

  if (IsPointwise(p)) {
    for (int i = 0; i < p.n; ++i)
      for (int gi = 0; gi < G; ++gi)
        SINGA_BLAS(cblas_sgemm)(
            CblasRowMajor, CblasNoTrans, CblasNoTrans, mg, int(N), cg, 1.f,
            w + size_t(gi) * mg * cg, cg, x + (size_t(i) * p.c + gi * cg) * N,
            int(N), 0.f, y + (size_t(i) * p.oc + gi * mg) * N, int(N));
    if (b) {
      const long rows = long(p.n) * p.oc;
#pragma omp parallel for schedule(static) if (rows * long(N) > kParallelWork)
      for (long r = 0; r < rows; ++r) {
        const float bv = b[r % p.oc];
        float* d = y + size_t(r) * N;
        for (size_t j = 0; j < N; ++j) d[j] += bv;
      }
    }
    return;
  }

  Workspace& ws = ThreadWorkspace();
  const size_t max_cols = size_t(s.images) * s.rows * s.g.ow;
  float* col = Reserve(&ws.col, size_t(p.c) * s.kk * max_cols);
  float* mat =
      s.images > 1 ? Reserve(&ws.mat, size_t(p.oc) * max_cols) : nullptr;

  ForEachTile(p, s, [&](const Tile& t) {
    const size_t T = t.per_image(s), L = t.cols(s);
    TileIm2Col(x, p, s, t, col);
    // Writing each image's product straight into y skips the re-layout. With
    // one image that is free; with several it pays off only when the GEMM is
    // memory-bound anyway (few kernel taps, e.g. a first layer) and each
    // image still gives it a wide N.
    const bool direct = t.nb == 1 || (K <= 64 && T >= 256);
    if (direct) {
      for (int i = 0; i < t.nb; ++i)
        for (int gi = 0; gi < G; ++gi)
          SINGA_BLAS(cblas_sgemm)(
              CblasRowMajor, CblasNoTrans, CblasNoTrans, mg, int(T), K, 1.f,
              w + size_t(gi) * mg * K, K, col + size_t(gi) * K * L + i * T,
              int(L), 0.f,
              y + (size_t(t.b0 + i) * p.oc + size_t(gi) * mg) * N +
                  size_t(t.oy0) * s.g.ow,
              int(N));
    } else {
      for (int gi = 0; gi < G; ++gi)
        SINGA_BLAS(cblas_sgemm)(CblasRowMajor, CblasNoTrans, CblasNoTrans, mg,
                                int(L), K, 1.f, w + size_t(gi) * mg * K, K,
                                col + size_t(gi) * K * L, int(L), 0.f,
                                mat + size_t(gi) * mg * L, int(L));
    }
    if (direct && !b) return;
    const long tasks = long(t.nb) * p.oc;
#pragma omp parallel for schedule(static) if (tasks * long(T) > kParallelWork)
    for (long q = 0; q < tasks; ++q) {
      const int i = int(q / p.oc);
      const int m = int(q % p.oc);
      const float bv = b ? b[m] : 0.f;
      float* d =
          y + (size_t(t.b0 + i) * p.oc + m) * N + size_t(t.oy0) * s.g.ow;
      const float* src = direct ? d : mat + m * L + i * T;
      for (size_t j = 0; j < T; ++j) d[j] = src[j] + bv;
    }
  });
}

void Conv2dBackwardData(const float* dy, const float* w, float* dx,
                        const ConvParams& p) {
  p.Validate();
  UseOpenMPForBlas();
  const ConvShape s = MakeShape(p);
  const size_t N = s.N;
  const size_t plane = size_t(p.h) * p.w;
  const int G = s.G, cg = s.cg, mg = s.mg, K = s.K;

  if (IsPointwise(p)) {
    for (int i = 0; i < p.n; ++i)
      for (int gi = 0; gi < G; ++gi)
        SINGA_BLAS(cblas_sgemm)(
            CblasRowMajor, CblasTrans, CblasNoTrans, cg, int(N), mg, 1.f,
            w + size_t(gi) * mg * cg, cg,
            dy + (size_t(i) * p.oc + gi * mg) * N, int(N), 0.f,
            dx + (size_t(i) * p.c + gi * cg) * N, int(N));
    return;
  }

  Workspace& ws = ThreadWorkspace();
  const size_t max_cols = size_t(s.images) * s.rows * s.g.ow;
  float* col = Reserve(&ws.col, size_t(p.c) * s.kk * max_cols);
  float* mat =
      s.images > 1 ? Reserve(&ws.mat, size_t(p.oc) * max_cols) : nullptr;

  ForEachTile(p, s, [&](const Tile& t) {
    const size_t T = t.per_image(s), L = t.cols(s);
    size_t ldd;
    const float* dmat = TileOutputMatrix(dy, p, s, t, mat, &ldd);
    for (int gi = 0; gi < G; ++gi)
      SINGA_BLAS(cblas_sgemm)(CblasRowMajor, CblasTrans, CblasNoTrans, K,
                              int(L), mg, 1.f, w + size_t(gi) * mg * K, K,
                              dmat + size_t(gi) * mg * ldd, int(ldd), 0.f,
                              col + size_t(gi) * K * L, int(L));
    const long tasks = long(t.nb) * p.c;
#pragma omp parallel for schedule(static) \
    if (tasks * long(s.kk * T) > kParallelWork)
    for (long q = 0; q < tasks; ++q) {
      const int i = int(q / p.c);
      const int ci = int(q % p.c);
      Col2ImChannel(col + ci * s.kk * L + i * T, s.g, L, t.oy0, t.oy1,
                    t.oy0 == 0, dx + (size_t(t.b0 + i) * p.c + ci) * plane);
    }
  });
}

void Conv2dBackwardWeight(const float* x, const float* dy, float* dw,
                          const ConvParams& p) {
  p.Validate();
  UseOpenMPForBlas();
  const ConvShape s = MakeShape(p);
  const size_t N = s.N;
  const int G = s.G, cg = s.cg, mg = s.mg, K = s.K;

  if (IsPointwise(p)) {
    for (int i = 0; i < p.n; ++i)
      for (int gi = 0; gi < G; ++gi)
        SINGA_BLAS(cblas_sgemm)(
            CblasRowMajor, CblasNoTrans, CblasTrans, mg, cg, int(N), 1.f,
            dy + (size_t(i) * p.oc + gi * mg) * N, int(N),
            x + (size_t(i) * p.c + gi * cg) * N, int(N), i == 0 ? 0.f : 1.f,
            dw + size_t(gi) * mg * cg, cg);
    return;
  }

  Workspace& ws = ThreadWorkspace();
  const size_t max_cols = size_t(s.images) * s.rows * s.g.ow;
  float* col = Reserve(&ws.col, size_t(p.c) * s.kk * max_cols);
  float* mat =
      s.images > 1 ? Reserve(&ws.mat, size_t(p.oc) * max_cols) : nullptr;
  float* tr = Reserve(&ws.tr, size_t(mg) * K);

  // The first tile overwrites dw, later ones accumulate into it.
  bool accumulate = false;
  ForEachTile(p, s, [&](const Tile& t) {
    const size_t L = t.cols(s);
    TileIm2Col(x, p, s, t, col);
    size_t ldd;
    const float* dmat = TileOutputMatrix(dy, p, s, t, mat, &ldd);
    if (UseLongReduction(mg, K, L)) {
      LongReductionNT(G, mg, K, L, dmat, ldd, col, L, accumulate, dw);
    } else {
      // OpenBLAS is markedly faster (20-50% on conv shapes) producing the
      // [K, mg] transpose than the [mg, K] result itself, so compute that
      // and transpose it into place.
      for (int gi = 0; gi < G; ++gi) {
        SINGA_BLAS(cblas_sgemm)(CblasRowMajor, CblasNoTrans, CblasTrans, K,
                                mg, int(L), 1.f, col + size_t(gi) * K * L,
                                int(L), dmat + size_t(gi) * mg * ldd,
                                int(ldd), 0.f, tr, mg);
        TransposeInto(tr, K, mg, accumulate, dw + size_t(gi) * mg * K);
      }
    }
    accumulate = true;
  });
}

void Conv2dBackwardBias(const float* dy, float* db, const ConvParams& p) {
  p.Validate();
  const size_t N = size_t(p.oh()) * p.ow();
  const int n = p.n, oc = p.oc;
  // Each image row is summed in float (vectorised, short), the per-image
  // partials in double so large batches do not lose precision.
#pragma omp parallel for schedule(static) \
    if (long(n) * oc * long(N) > kParallelWork)
  for (int m = 0; m < oc; ++m) {
    double acc = 0.0;
    for (int i = 0; i < n; ++i) {
      const float* s = dy + (size_t(i) * oc + m) * N;
      float part = 0.f;
#pragma omp simd reduction(+ : part)
      for (size_t j = 0; j < N; ++j) part += s[j];
      acc += part;
    }
    db[m] = float(acc);
  }
}

}  // namespace cpu
}  // namespace singa
