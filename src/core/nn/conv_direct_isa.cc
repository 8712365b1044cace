// The direct data gradient of conv_direct.h for one ISA family.
//
// Per image, dy is first copied into P: plane m of P holds dy's plane m
// shifted by (kh - 1 - pad_t, kw - 1 - pad_l) inside a border of zeros, so
// that dx[iy][ix] = sum over m, ki, kj of wf[m][ki][kj] * P[m][iy + ki][ix + kj]
// with no bounds to check. A register tile covers R dx rows by two vectors;
// for each output channel and kernel column it loads the R + kh - 1 rows of
// P the tile reaches once and multiplies each by the weights of every kernel
// row landing on a tile row. The kernel height is a template argument so the
// tile's accumulators stay in registers.
#include <algorithm>
#include <cstdint>
#include <cstring>

#if defined(__AVX2__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "conv_direct.h"
#include "isa_vec.h"

#ifndef SINGA_ISA_NS
#error "conv_direct_isa.cc is compiled per ISA: define SINGA_ISA_NS and SINGA_ISA_LEVEL"
#endif

namespace singa {
namespace cpu {
namespace SINGA_ISA_NS {

namespace {

// Vector registers: 16 below AVX-512, 32 with it.
constexpr int kRegs = SINGA_ISA_LEVEL >= 2 ? 32 : 16;

// A register tile is R dx rows by kV vectors. Per output channel and kernel
// column it loads (R + kh - 1) * kV vectors and broadcasts kh weights for
// R * kh * kV multiply-adds, so tall tiles need the fewest loads per
// multiply-add. R is at most what the registers allow (R * kV accumulators,
// kh weights, kV P vectors and one spare), or one or two less when that
// tiles dx's height more closely. Each accumulator is a chain of dependent
// multiply-adds: fewer than kChains of them leave the FMA units waiting on
// latency, and the tile choice counts that as lost time. (One-vector tiles,
// with more rows for the same registers, and tiles that broadcast each
// weight where it is used, leaving more registers for rows, both measured
// slower on AVX2 for LeNet's and ResNet's first layers.)
constexpr int kV = 2;
constexpr int kRowChoices = 3;
constexpr int kChains = 8;
constexpr int MaxRows(int kh) {
  return std::clamp((kRegs - 1 - kV - kh) / kV, kRowChoices, 12);
}

// Keeps v in a register: otherwise the compiler folds the load into every
// multiply-add that uses it, loading the same P vector up to kh times.
inline void InRegister(Vec& v) {
#if (defined(__x86_64__) || defined(__i386__)) && \
    (SINGA_ISA_LEVEL < 2 || defined(__AVX512F__))
  asm("" : "+v"(v));
#else
  (void)v;
#endif
}

// a * b + c as one instruction where there is one. Written out, the
// compiler (allowed to reassociate here) regroups a tile's sums into trees
// whose partial sums no longer fit in the registers.
inline Vec Fma(Vec a, Vec b, Vec c) {
#if SINGA_ISA_LEVEL >= 2 && defined(__AVX512F__)
  return Vec(_mm512_fmadd_ps(__m512(a), __m512(b), __m512(c)));
#elif SINGA_ISA_LEVEL == 1 && defined(__FMA__)
  return Vec(_mm256_fmadd_ps(__m256(a), __m256(b), __m256(c)));
#else
  return a * b + c;
#endif
}

// P holds up to this many floats (L2 sized) of output channels at a time;
// dx accumulates over such groups. Smaller groups that stay in L1 measured
// slower: each costs a pass over dx.
constexpr int64_t kPackFloats = 32 * 1024;

// Whether a band of R tile rows whose P rows [s_lo, s_hi) hold dy should
// skip the others: that costs branches, worth it for a third of them.
inline bool SkipRows(int s_lo, int s_hi, int R, int kh) {
  return 3 * (std::max(0, s_lo) + std::max(0, R + kh - 1 - s_hi)) >= R + kh - 1;
}

struct Layout {
  int rows;        // tile rows
  int tiles_x;     // tiles across a dx row
  int hp, wp;    // P plane
  int64_t plane;
  int mc;        // output channels P holds
  int py0, py1;  // the rows of P that hold dy (the others are zeros)
};


// Where dy's rows lie in P: P column X holds dy column X - x_shift, P row Y
// dy row Y - y_shift; the part of dy that P holds is rows [y0, y1) and
// columns [x0, x1) of dy.
struct Interior {
  int x_shift, y_shift, x0, x1, y0, y1;
};

Interior InteriorOf(const DirectDxJob& j, const Layout& l) {
  Interior in;
  in.x_shift = j.kw - 1 - j.pad_l;
  in.y_shift = j.kh - 1 - j.pad_t;
  in.x0 = std::max(0, -in.x_shift);
  in.x1 = std::max(in.x0, std::min(j.ow, l.wp - in.x_shift));
  in.y0 = std::max(0, -in.y_shift);
  in.y1 = std::max(in.y0, std::min(j.oh, l.hp - in.y_shift));
  return in;
}

Layout LayoutOf(const DirectDxJob& j) {
  Layout l;
  // The tile height with the least time: the multiply-adds it runs (rows of
  // P skipped at the edges left out, Tile's branches there counted) over
  // the share of the FMA units its chains keep busy.
  const int y_shift = j.kh - 1 - j.pad_t;
  double best = 0;
  for (int r = MaxRows(j.kh); r > MaxRows(j.kh) - kRowChoices; --r) {
    const int hp = (j.h + r - 1) / r * r + j.kh - 1;
    const int py0 = std::max(0, y_shift), py1 = std::min(j.oh + y_shift, hp);
    double fmas = 0;
    for (int y0 = 0; y0 < j.h; y0 += r) {
      const int s_lo = py0 - y0, s_hi = py1 - y0;
      if (!SkipRows(s_lo, s_hi, r, j.kh)) {
        fmas += r * j.kh;
        continue;
      }
      int n = 0;
      for (int s = std::max(0, s_lo); s < std::min(r + j.kh - 1, s_hi); ++s)
        n += std::min(s, r - 1) - std::max(0, s - j.kh + 1) + 1;
      fmas += 1.15 * n;
    }
    const double cost = fmas * std::max(1.0, double(kChains) / (r * kV));
    if (best == 0 || cost < best) {
      best = cost;
      l.rows = r;
    }
  }
  const int tw = kV * kVW;
  l.tiles_x = (j.w + tw - 1) / tw;
  // Whole tiles in both directions read inside P.
  l.hp = (j.h + l.rows - 1) / l.rows * l.rows + j.kh - 1;
  l.wp = (l.tiles_x * tw + j.kw - 1 + kVW - 1) / kVW * kVW;
  l.plane = int64_t(l.hp) * l.wp;
  l.mc = int(std::clamp<int64_t>(kPackFloats / l.plane, 1, j.mg));
  const Interior in = InteriorOf(j, l);
  l.py0 = in.y0 + in.y_shift;
  l.py1 = in.y1 + in.y_shift;
  return l;
}

// Copies output channels [m0, m0 + nm) of image b of dy into P. Only dy's
// own rows are written: the zeros around them stay from DirectDxClear.
void PackImage(const DirectDxJob& j, const Layout& l, int b, int m0, int nm,
               float* P) {
  const Interior in = InteriorOf(j, l);
  const int n = in.x1 - in.x0;
  if (n == 0) return;
  const float* dy = j.dy + (int64_t(b) * j.mg + m0) * j.oh * j.ow;
  for (int m = 0; m < nm; ++m)
    for (int y = in.y0; y < in.y1; ++y) {
      const float* s = dy + (int64_t(m) * j.oh + y) * j.ow + in.x0;
      float* d = P + m * l.plane + int64_t(y + in.y_shift) * l.wp +
                 in.x0 + in.x_shift;
      if (n >= kVW) {
        // Rows are short: whole vectors and one overlapping the end.
        for (int i = 0; i + kVW <= n; i += kVW) Store(d + i, Load(s + i));
        Store(d + n - kVW, Load(s + n - kVW));
      } else {
        for (int i = 0; i < n; ++i) d[i] = s[i];
      }
    }
}

// Rows [0, rows) and columns [0, cols) of a dx tile at out (ldo floats
// apart) (accumulate ? += : =) the correlation of P (p at the tile's first
// row and column) with the mg flipped kernels at wc.
// With Edge set, only P rows [s_lo, s_hi) of the tile's R + KH - 1 are
// read: the others are zeros (dx rows near the top and bottom, where some
// kernel rows fall into the padding).
template <int KH, int R, int V, bool Edge>
void Tile(const float* p, int64_t plane, int wp, const float* wc, int mg,
          int kw, float* out, int ldo, int rows, int cols, bool accumulate,
          int s_lo, int s_hi) {
  Vec acc[R][V];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 2
    for (int v = 0; v < V; ++v) acc[r][v] = Vec{};
  for (int m = 0; m < mg; ++m, p += plane, wc += KH * kw) {
    for (int kj = 0; kj < kw; ++kj) {
      Vec wv[KH];
#pragma GCC unroll 8
      for (int ki = 0; ki < KH; ++ki) wv[ki] = Vec{} + wc[ki * kw + kj];
      const float* src = p + kj;
#pragma GCC unroll 32
      for (int s = 0; s < R + KH - 1; ++s) {
        if (Edge && (s < s_lo || s >= s_hi)) continue;
        Vec pv[V];
#pragma GCC unroll 2
        for (int v = 0; v < V; ++v) {
          pv[v] = Load(src + int64_t(s) * wp + v * kVW);
          InRegister(pv[v]);
        }
#pragma GCC unroll 8
        for (int ki = 0; ki < KH; ++ki) {
          const int r = s - ki;
          if (r < 0 || r >= R) continue;
#pragma GCC unroll 2
          for (int v = 0; v < V; ++v) acc[r][v] = Fma(wv[ki], pv[v], acc[r][v]);
        }
      }
    }
  }
  for (int r = 0; r < rows; ++r)
    for (int v = 0; v < V && v * kVW < cols; ++v) {
      float* o = out + int64_t(r) * ldo + v * kVW;
      const int n = std::min(kVW, cols - v * kVW);
      if (n == kVW) {
        Store(o, accumulate ? Load(o) + acc[r][v] : acc[r][v]);
      } else {
        float t[kVW];
        Store(t, acc[r][v]);
        for (int i = 0; i < n; ++i) o[i] = accumulate ? o[i] + t[i] : t[i];
      }
    }
}

// One dx plane (+)= the nm output channels in P with their kernels at wc.
template <int KH, int R>
void Channel(const DirectDxJob& j, const Layout& l, const float* P,
             const float* wc, int nm, float* out, bool accumulate) {
  for (int y0 = 0; y0 < j.h; y0 += R) {
    const int s_lo = l.py0 - y0, s_hi = l.py1 - y0;
    const bool edge = SkipRows(s_lo, s_hi, R, KH);
    for (int t = 0; t < l.tiles_x; ++t) {
      const int x0 = t * kV * kVW;
      const float* p = P + int64_t(y0) * l.wp + x0;
      float* o = out + int64_t(y0) * j.w + x0;
      const int rows = std::min(R, j.h - y0), cols = std::min(kV * kVW, j.w - x0);
      if (edge)
        Tile<KH, R, kV, true>(p, l.plane, l.wp, wc, nm, j.kw, o, j.w,
                                   rows, cols, accumulate, s_lo, s_hi);
      else
        Tile<KH, R, kV, false>(p, l.plane, l.wp, wc, nm, j.kw, o, j.w,
                                    rows, cols, accumulate, s_lo, s_hi);
    }
  }
}

template <int KH>
void ChannelRows(const DirectDxJob& j, const Layout& l, const float* P,
                 const float* wc, int nm, float* out, bool accumulate) {
  constexpr int top = MaxRows(KH);
  static_assert(kRowChoices == 3, "one case per row choice");
  switch (top - l.rows) {
    case 0: return Channel<KH, top>(j, l, P, wc, nm, out, accumulate);
    case 1: return Channel<KH, top - 1>(j, l, P, wc, nm, out, accumulate);
    default: return Channel<KH, top - 2>(j, l, P, wc, nm, out, accumulate);
  }
}

}  // namespace

size_t DirectDxWorkFloats(const DirectDxJob& job) {
  const Layout l = LayoutOf(job);
  return size_t(l.mc) * size_t(l.plane);
}

void DirectDxClear(const DirectDxJob& job, float* work) {
  std::memset(work, 0, sizeof(float) * DirectDxWorkFloats(job));
}

void DirectDxImage(const DirectDxJob& j, int b, float* work) {
  const Layout l = LayoutOf(j);
  const int kk = j.kh * j.kw;
  for (int m0 = 0; m0 < j.mg; m0 += l.mc) {
    const int nm = std::min(l.mc, j.mg - m0);
    PackImage(j, l, b, m0, nm, work);
    for (int c = 0; c < j.c; ++c) {
      const float* wc = j.wf + (int64_t(c) * j.mg + m0) * kk;
      float* out = j.dx + (int64_t(b) * j.c + c) * j.h * j.w;
      const bool acc = m0 > 0;
      switch (j.kh) {
        case 1: ChannelRows<1>(j, l, work, wc, nm, out, acc); break;
        case 2: ChannelRows<2>(j, l, work, wc, nm, out, acc); break;
        case 3: ChannelRows<3>(j, l, work, wc, nm, out, acc); break;
        case 4: ChannelRows<4>(j, l, work, wc, nm, out, acc); break;
        case 5: ChannelRows<5>(j, l, work, wc, nm, out, acc); break;
        case 6: ChannelRows<6>(j, l, work, wc, nm, out, acc); break;
        default: ChannelRows<7>(j, l, work, wc, nm, out, acc); break;
      }
    }
  }
}

}  // namespace SINGA_ISA_NS
}  // namespace cpu
}  // namespace singa
