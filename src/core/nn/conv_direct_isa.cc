// The direct data gradient of conv_direct.h for one ISA family.
//
// Per image, dy is first copied into P: plane m of P holds dy's plane m
// shifted by (kh - 1 - pad_t, kw - 1 - pad_l) inside a border of zeros, so
// that dx[iy][ix] = sum over m, ki, kj of wf[m][ki][kj] * P[m][iy + ki][ix + kj]
// with no bounds to check. A register tile covers R dx rows by two vectors;
// for each output channel and kernel column it loads the R + kh - 1 rows of
// P the tile reaches once and multiplies each by the weights of every kernel
// row landing on a tile row. When dx rows do not fill whole tiles (LeNet's
// 28 floats in 16-float tiles), several images sit side by side in P's
// rows, each in a segment of sw >= w + pad columns: the zeros right of one
// image's dy are the zeros left of the next one's, and the tiles run across
// the segments, so fewer lanes compute columns that are thrown away. The
// kernel height is a template argument so the tile's accumulators stay in
// registers. A large dy is fetched one pack ahead (Ahead).
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

// P holds up to this many floats (320 KB, within a server core's L2) of
// output channels at a time; dx accumulates over such groups. Smaller groups
// that stay in L1 measured slower: each costs a pass over dx. (LeNet's first
// layer, four images side by side, fits its 20 channels in one group.)
constexpr int64_t kPackFloats = 80 * 1024;

// Whether a band of R tile rows whose P rows [s_lo, s_hi) hold dy should
// skip the others: that costs branches, worth it for a third of them.
inline bool SkipRows(int s_lo, int s_hi, int R, int kh) {
  return 3 * (std::max(0, s_lo) + std::max(0, R + kh - 1 - s_hi)) >= R + kh - 1;
}

// Images side by side in P at most.
constexpr int kMaxGroup = 4;

struct Layout {
  int rows;        // tile rows
  int group;       // images side by side in P
  int sw;          // P columns per image (its segment)
  int tiles_x;     // tiles across a row of P
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
  // Images per P row: the fewest tile columns per image. The segments need
  // zeros of their own on both sides (pads up to kw - 1).
  const int tw = kV * kVW;
  l.group = 1;
  l.sw = j.w;
  l.tiles_x = (j.w + tw - 1) / tw;
  if (j.pad_l <= j.kw - 1 && j.pad_r <= j.kw - 1) {
    const int sw = j.w + std::max(j.pad_l, j.pad_r);
    for (int g = 2; g <= std::min(kMaxGroup, j.n); ++g) {
      const int tiles = (g * sw + tw - 1) / tw;
      if (int64_t(tiles) * l.group < int64_t(l.tiles_x) * g) {
        l.group = g;
        l.sw = sw;
        l.tiles_x = tiles;
      }
    }
  }
  // Whole tiles in both directions read inside P.
  l.hp = (j.h + l.rows - 1) / l.rows * l.rows + j.kh - 1;
  l.wp = (l.tiles_x * tw + j.kw - 1 + kVW - 1) / kVW * kVW;
  l.plane = int64_t(l.hp) * l.wp;
  // Equal groups: a short last one would cost a whole pass over dx.
  const int64_t cap = std::clamp<int64_t>(kPackFloats / l.plane, 1, j.mg);
  const int64_t packs = (j.mg + cap - 1) / cap;
  l.mc = int((j.mg + packs - 1) / packs);
  const Interior in = InteriorOf(j, l);
  l.py0 = in.y0 + in.y_shift;
  l.py1 = in.y1 + in.y_shift;
  return l;
}

// Copies output channels [m0, m0 + nm) of image b of dy into segment g of
// P. Only dy's own rows and columns are written: the zeros around them stay
// from DirectDxClear.
void PackImage(const DirectDxJob& j, const Layout& l, int b, int g, int m0,
               int nm, float* P) {
  const Interior in = InteriorOf(j, l);
  const int n = in.x1 - in.x0;
  if (n == 0) return;
  const float* dy = j.dy + (int64_t(b) * j.mg + m0) * j.oh * j.ow;
  for (int m = 0; m < nm; ++m)
    for (int y = in.y0; y < in.y1; ++y) {
      const float* s = dy + (int64_t(m) * j.oh + y) * j.ow + in.x0;
      float* d = P + m * l.plane + int64_t(y + in.y_shift) * l.wp +
                 g * l.sw + in.x0 + in.x_shift;
      if (n >= kVW) {
        // Rows are short: whole vectors and one overlapping the end.
        for (int i = 0; i + kVW <= n; i += kVW) Store(d + i, Load(s + i));
        Store(d + n - kVW, Load(s + n - kVW));
      } else {
        for (int i = 0; i < n; ++i) d[i] = s[i];
      }
    }
}

// Where a tile's columns go: P column X is column X % sw of image X / sw of
// the group, dropped where that is past w or past the images there are
// (planes[g] null).
struct Dest {
  float* const* planes;  // the dx plane of each image of the group
  int group, sw, w;
  bool accumulate;
};

// The dy the next pack reads (conv_direct.h: per image of the next group,
// `floats` floats from `at[g]`), fetched into L2 while this pack is
// computed: the hardware prefetchers stop at the end of each plane, and a
// stem layer's dy (16 MB at batch 64) otherwise waits on memory in every
// PackImage. Each tile fetches its share of the lines, a few per output
// channel it sums (Fetch), so that they go out among the multiply-adds:
// the same lines fetched a share per band of tiles at once, about 170 of
// them, made no difference against no fetch at all (each waits for a free
// miss buffer, and the misses then overlap little work), where spreading
// them took 0.76-0.82x the time at one thread and 0.88-0.98x at two
// (ResNet-18's stem at batch 64, AVX2 EPYC, Zen 4, alternating call by
// call).
struct Ahead {
  const float* at[kMaxGroup];
  int images;
  int64_t floats;
  int parts;  // tiles over all channels and bands of the pack
};

// One tile's share of the next pack: `floats` floats from at[g] for each of
// `images` images.
struct Fetch {
  const float* at[kMaxGroup];
  int images = 0;
  int64_t floats = 0;
};

// Share `part` of `ahead.parts` of each image's lines of the next pack.
Fetch ShareOf(const Ahead& ahead, int64_t part) {
  Fetch f;
  const int64_t lines = (ahead.floats + 15) / 16;
  const int64_t l0 = lines * part / ahead.parts;
  f.images = ahead.images;
  f.floats = (lines * (part + 1) / ahead.parts - l0) * 16;
  for (int g = 0; g < ahead.images; ++g) f.at[g] = ahead.at[g] + l0 * 16;
  return f;
}

// (d.accumulate ? += : =) one vector of a tile: P columns [x, x + kVW) of
// dx row y.
inline void StoreVec(const Dest& d, int y, int x, Vec v) {
  const int g = x / d.sw, ix = x - g * d.sw;
  if (ix + kVW <= d.w && g < d.group && d.planes[g]) {
    float* o = d.planes[g] + int64_t(y) * d.w + ix;
    Store(o, d.accumulate ? Load(o) + v : v);
    return;
  }
  float t[kVW];
  Store(t, v);
  for (int l = 0; l < kVW; ++l) {
    const int gl = (x + l) / d.sw, il = x + l - gl * d.sw;
    if (il >= d.w || gl >= d.group || !d.planes[gl]) continue;
    float* o = d.planes[gl] + int64_t(y) * d.w + il;
    *o = d.accumulate ? *o + t[l] : t[l];
  }
}

// dx rows [y0, y0 + rows) at P columns [x0, x0 + V * kVW) of the group
// (accumulate ? += : =) the correlation of P (p at the tile's first row and
// column) with the mg flipped kernels at wc.
// With Edge set, only P rows [s_lo, s_hi) of the tile's R + KH - 1 are
// read: the others are zeros (dx rows near the top and bottom, where some
// kernel rows fall into the padding).
//
// Output channel m also fetches its share of `fetch` (see Ahead).
template <int KH, int R, int V, bool Edge>
void Tile(const float* p, int64_t plane, int wp, const float* wc, int mg,
          int kw, const Dest& out, int y0, int x0, int rows, int s_lo,
          int s_hi, const Fetch& fetch) {
  Vec acc[R][V];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 2
    for (int v = 0; v < V; ++v) acc[r][v] = Vec{};
  for (int m = 0; m < mg; ++m, p += plane, wc += KH * kw) {
    for (int g = 0; g < fetch.images; ++g)
      PrefetchL2Part(fetch.at[g], fetch.floats, m, mg);
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
#pragma GCC unroll 2
    for (int v = 0; v < V; ++v) StoreVec(out, y0 + r, x0 + v * kVW, acc[r][v]);
}

// One dx plane per image of the group (+)= the nm output channels in P
// with their kernels at wc.
template <int KH, int R>
void Channel(const DirectDxJob& j, const Layout& l, const float* P,
             const float* wc, int nm, const Dest& out, const Ahead& ahead,
             int c) {
  const int bands = (j.h + R - 1) / R;
  for (int y0 = 0; y0 < j.h; y0 += R) {
    const int s_lo = l.py0 - y0, s_hi = l.py1 - y0;
    const bool edge = SkipRows(s_lo, s_hi, R, KH);
    for (int t = 0; t < l.tiles_x; ++t) {
      const int x0 = t * kV * kVW;
      const float* p = P + int64_t(y0) * l.wp + x0;
      const int rows = std::min(R, j.h - y0);
      const Fetch fetch =
          ahead.images > 0
              ? ShareOf(ahead, (int64_t(c) * bands + y0 / R) * l.tiles_x + t)
              : Fetch{};
      if (edge)
        Tile<KH, R, kV, true>(p, l.plane, l.wp, wc, nm, j.kw, out, y0, x0,
                              rows, s_lo, s_hi, fetch);
      else
        Tile<KH, R, kV, false>(p, l.plane, l.wp, wc, nm, j.kw, out, y0, x0,
                               rows, s_lo, s_hi, fetch);
    }
  }
}

template <int KH>
void ChannelRows(const DirectDxJob& j, const Layout& l, const float* P,
                 const float* wc, int nm, const Dest& out, const Ahead& ahead,
                 int c) {
  constexpr int top = MaxRows(KH);
  static_assert(kRowChoices == 3, "one case per row choice");
  switch (top - l.rows) {
    case 0: return Channel<KH, top>(j, l, P, wc, nm, out, ahead, c);
    case 1: return Channel<KH, top - 1>(j, l, P, wc, nm, out, ahead, c);
    default: return Channel<KH, top - 2>(j, l, P, wc, nm, out, ahead, c);
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

int DirectDxGroup(const DirectDxJob& job) { return LayoutOf(job).group; }

void DirectDxImage(const DirectDxJob& j, int b, float* work) {
  const Layout l = LayoutOf(j);
  const int kk = j.kh * j.kw;
  const int images = std::min(l.group, j.n - b);
  for (int m0 = 0; m0 < j.mg; m0 += l.mc) {
    const int nm = std::min(l.mc, j.mg - m0);
    // Segments past the last image keep an earlier group's dy: their
    // columns are computed but not stored, and no other segment reads them.
    for (int g = 0; g < images; ++g) PackImage(j, l, b + g, g, m0, nm, work);
    // The next pack: the next channels of these images, else the first
    // channels of the next group (the same thread's next call, as threads
    // take consecutive groups; a wasted fetch otherwise).
    Ahead ahead{};
    const int plane_dy = j.oh * j.ow;
    const int nb = m0 + nm < j.mg ? b : b + l.group;
    const int nm0 = m0 + nm < j.mg ? m0 + nm : 0;
    if (int64_t(j.n) * j.mg * plane_dy >= kFetchAheadFloats && nb < j.n) {
      ahead.images = std::min(l.group, j.n - nb);
      for (int g = 0; g < ahead.images; ++g)
        ahead.at[g] = j.dy + (int64_t(nb + g) * j.mg + nm0) * plane_dy;
      ahead.floats = int64_t(std::min(l.mc, j.mg - nm0)) * plane_dy;
      ahead.parts = j.c * ((j.h + l.rows - 1) / l.rows) * l.tiles_x;
    }
    for (int c = 0; c < j.c; ++c) {
      const float* wc = j.wf + (int64_t(c) * j.mg + m0) * kk;
      float* planes[kMaxGroup] = {};
      for (int g = 0; g < images; ++g)
        planes[g] = j.dx + (int64_t(b + g) * j.c + c) * j.h * j.w;
      const Dest out{planes, l.group, l.sw, j.w, m0 > 0};
      switch (j.kh) {
        case 1: ChannelRows<1>(j, l, work, wc, nm, out, ahead, c); break;
        case 2: ChannelRows<2>(j, l, work, wc, nm, out, ahead, c); break;
        case 3: ChannelRows<3>(j, l, work, wc, nm, out, ahead, c); break;
        case 4: ChannelRows<4>(j, l, work, wc, nm, out, ahead, c); break;
        case 5: ChannelRows<5>(j, l, work, wc, nm, out, ahead, c); break;
        case 6: ChannelRows<6>(j, l, work, wc, nm, out, ahead, c); break;
        default: ChannelRows<7>(j, l, work, wc, nm, out, ahead, c); break;
      }
    }
  }
}

}  // namespace SINGA_ISA_NS
}  // namespace cpu
}  // namespace singa
