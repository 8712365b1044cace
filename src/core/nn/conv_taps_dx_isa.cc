// The tap-scatter data gradient of conv_taps_dx.h for one ISA family.
//
// Per image, dx is summed in S, a zeroed plane per input channel with room
// for every tap's adds: S[c][y][x] is dx[c][y - pad_t][x - pad_l], sh =
// oh + kh - 1 rows of sw = RoundUp(ow, kVW) + kw - 1 floats, so no add
// needs a bounds check; the part inside dx is copied out at the end. When S
// is exactly dx's plane (no padding, ow a whole number of vectors: LeNet's
// first layer with 8-float vectors) dx is summed in place. dy's pixels are
// taken kVW at a time along its rows ("spots"), V spots per tile; a row's
// last spot may be short (its missing lanes are zeros). Where every row ends
// in exactly half a vector (LeNet's first layer, rows of 24, with 16-float
// vectors), the half spots of two rows share one vector ("pairs"), which
// leaves no lane idle; a pair's adds into S go half by half. LeNet's first
// data gradient took 0.78-0.81x the time with pairs at one and two threads
// (AVX-512); rows of 28 with the AVX2 kernels 0.87-0.90x (Zen 5, processes
// alternating).
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "conv_taps_dx.h"
#include "isa_vec.h"

#ifndef SINGA_ISA_NS
#error "conv_taps_dx_isa.cc is compiled per ISA: define SINGA_ISA_NS and SINGA_ISA_LEVEL"
#endif

namespace singa {
namespace cpu {
namespace SINGA_ISA_NS {

namespace {

// Vector registers: 16 below AVX-512, 32 with it.
constexpr int kRegs = SINGA_ISA_LEVEL >= 2 ? 32 : 16;
constexpr int kMaxV = 8;

// Spots per tile for kh = R: R * V accumulators, the V dy vectors and one
// broadcast weight fill the registers with at most one dy vector left to be
// read from memory by its multiply-adds. On AVX2 (Zen 4, alternating call
// by call) four spots for kh = 3 took 0.80-0.84x the time of three (which
// leave every dy vector in a register), and three for kh = 5 (three dy
// vectors from memory) took 1.08-1.14x the time of two.
constexpr int SpotsFor(int R) { return std::min(kMaxV, kRegs / (R + 1)); }

struct Geometry {
  int vr;  // spots per dy row
  bool pairs;  // rows end in half a vector, and their halves go in pairs
  int spots;   // spots per image
  int sh, sw;
  int64_t splane;
  bool in_place;  // S is dx's own plane
};

Geometry GeometryOf(const TapsDxJob& j) {
  Geometry g;
  g.vr = (j.ow + kVW - 1) / kVW;
  g.pairs = j.ow % kVW == kVW / 2 && j.oh > 1;
  g.spots = g.pairs ? j.oh * (g.vr - 1) + (j.oh + 1) / 2 : j.oh * g.vr;
  g.sh = j.oh + j.kh - 1;
  g.sw = g.vr * kVW + j.kw - 1;
  g.splane = int64_t(g.sh) * g.sw;
  g.in_place = j.pad_t == 0 && j.pad_l == 0 && g.sh == j.h && g.sw == j.w;
  return g;
}

// The dy of the next spots, fetched into L2 while a tile computes: the
// lines at at[v] (v < n) of planes [m0, m1) of the image, one plane per
// output channel the tile sums (m1 - m0 <= mg). A stem layer's dy (8-16 MB
// at batch 32-64) otherwise waits on memory in every pack: its 64 planes
// are 64 streams, each advancing a line or two per spot group, more than
// the hardware prefetchers follow. Alternating call by call on AVX2 (Zen 4),
// ResNet-18's stem at batch 32 and 64 took 0.55-0.69x the time with the
// fetch; LeNet's first layer (2.9 MB, cached between calls) 1.06-1.09x, so
// only dy of kFetchAheadFloats and more is fetched.
struct Fetch {
  const float* at[kMaxV];
  int n = 0;
  int64_t mplane = 0;
  int m0 = 0, m1 = 0;
};

// A tile: the R taps (rows of one kernel column) of one input channel, for
// V spots. d holds the spots' dy packed as [mg][V] vectors, wt the column's
// [mg][R] weights; S points at the channel's plane shifted by the column,
// soff[v] at spot v's first target from there, and for a pair soff2[v] at
// its upper half's (-1 for other spots).
template <int R, int V>
void Tile(const float* d, const float* wt, int mg, float* S, const int* soff,
          const int* soff2, int sw, const Fetch& f) {
  Vec acc[R][V];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int v = 0; v < V; ++v) acc[r][v] = Vec{};
  for (int m = 0; m < mg; ++m, d += V * kVW, wt += R) {
    if (m < f.m1 - f.m0)
      for (int v = 0; v < f.n; ++v)
        PrefetchL2Part(f.at[v] + (f.m0 + m) * f.mplane, 1, 0, 1);
    Vec dv[V];
#pragma GCC unroll 8
    for (int v = 0; v < V; ++v) dv[v] = Load(d + v * kVW);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const Vec wv = Vec{} + wt[r];
#pragma GCC unroll 8
      for (int v = 0; v < V; ++v) acc[r][v] = Fma(wv, dv[v], acc[r][v]);
    }
  }
  // Row r of spot v lands on S row y + r. Adds of two spots of a tile that
  // meet cover the same floats (spots lie whole vectors, or whole pairs'
  // halves, apart), so each reads what the one before stored.
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int v = 0; v < V; ++v) {
      float* o = S + soff[v] + int64_t(r) * sw;
      if (soff2[v] < 0) {
        Store(o, Load(o) + acc[r][v]);
      } else {
        float* o2 = S + soff2[v] + int64_t(r) * sw;
        StoreHalves(o, o2, LoadHalves(o, o2) + acc[r][v]);
      }
    }
}

// Spot s of an image: its dy offset (in a plane), first target in S and
// lanes; for a pair, the same of its upper half (dy2 and s2, else -1). With
// pairs, the whole vectors of every row come first, then the pairs of rows
// 2i and 2i + 1 (the last row alone, as a half spot, when oh is odd).
struct Spot {
  int dy, s, lanes;
  int dy2 = -1, s2 = -1;
};

Spot SpotAt(const TapsDxJob& j, const Geometry& g, int s) {
  if (g.pairs) {
    const int whole = j.oh * (g.vr - 1), x = (g.vr - 1) * kVW;
    if (s >= whole) {
      const int y = 2 * (s - whole);
      Spot sp{y * j.ow + x, y * g.sw + x, kVW / 2};
      if (y + 1 < j.oh) {
        sp.dy2 = sp.dy + j.ow;
        sp.s2 = sp.s + g.sw;
        sp.lanes = kVW;
      }
      return sp;
    }
    const int y = s / (g.vr - 1);
    return Spot{y * j.ow + s % (g.vr - 1) * kVW, y * g.sw + s % (g.vr - 1) * kVW, kVW};
  }
  const int y = s / g.vr, x = s % g.vr * kVW;
  return Spot{y * j.ow + x, y * g.sw + x, std::min(kVW, j.ow - x)};
}

// Adds all taps of the nv <= V spots from s0 of one image (dy at dyb) into
// S. The spots' dy is first packed into `pack`: read in place, the output
// channels' planes of a stem layer (32x32 floats) lie a multiple of 4 KB
// apart and share one set of the L1 cache. The pack goes plane by plane,
// all spots of a plane together, so a line two spots share is loaded
// while still in L1 (spot by spot, the other planes had evicted it: the
// stem's data gradient took 0.80-0.86x the time plane by plane, LeNet's
// first layer 0.94-1.05x; AVX2 Zen 4, alternating call by call).
template <int R, int V>
void Spots(const TapsDxJob& j, const Geometry& g, const float* dyb, int s0,
           int nv, float* S, float* pack, Fetch next) {
  if constexpr (V > 1) {
    if (nv < V) return Spots<R, V - 1>(j, g, dyb, s0, nv, S, pack, next);
  }
  int soff[V], soff2[V], lanes[V];
  const float* src[V];
  const float* src2[V];
  bool whole = true, halves = false;
  for (int v = 0; v < V; ++v) {
    const Spot sp = SpotAt(j, g, s0 + v);
    soff[v] = sp.s;
    soff2[v] = sp.s2;
    src[v] = dyb + sp.dy;
    src2[v] = sp.dy2 < 0 ? nullptr : dyb + sp.dy2;
    lanes[v] = sp.lanes;
    whole &= sp.lanes == kVW && sp.dy2 < 0;
    halves |= sp.dy2 >= 0;
  }
  const int64_t mplane = int64_t(j.oh) * j.ow;
  float* dst = pack;
  if (whole)
    for (int m = 0; m < j.mg; ++m, dst += V * kVW)
#pragma GCC unroll 8
      for (int v = 0; v < V; ++v) Store(dst + v * kVW, Load(src[v] + m * mplane));
  else if (halves)
    for (int m = 0; m < j.mg; ++m, dst += V * kVW)
      for (int v = 0; v < V; ++v)
        Store(dst + v * kVW,
              src2[v] ? LoadHalves(src[v] + m * mplane, src2[v] + m * mplane)
                      : LoadFirst(src[v] + m * mplane, lanes[v]));
  else
    for (int m = 0; m < j.mg; ++m, dst += V * kVW)
#pragma GCC unroll 8
      for (int v = 0; v < V; ++v)
        Store(dst + v * kVW, LoadFirst(src[v] + m * mplane, lanes[v]));
  const int tiles = j.c * j.kw;
  for (int t = 0; t < tiles; ++t) {
    const int c = t / j.kw, kj = t % j.kw;
    next.m0 = j.mg * t / tiles;
    next.m1 = j.mg * (t + 1) / tiles;
    Tile<R, V>(pack, j.wt + int64_t(t) * j.mg * R, j.mg,
               S + c * g.splane + kj, soff, soff2, g.sw, next);
  }
}

// The spots from s0 of the image whose dy is at dyb, to fetch.
Fetch FetchOf(const TapsDxJob& j, const Geometry& g, const float* dyb, int s0,
              int V) {
  Fetch f;
  f.mplane = int64_t(j.oh) * j.ow;
  f.n = std::min(V, g.spots - s0);
  for (int v = 0; v < f.n; ++v) f.at[v] = dyb + SpotAt(j, g, s0 + v).dy;
  return f;
}

// One image's taps into S; with `fetch`, each group of spots fetches the
// next (the first of the next image, at next_dyb, after the last).
template <int R>
void Image(const TapsDxJob& j, const Geometry& g, const float* dyb, float* S,
           float* pack, bool fetch, const float* next_dyb) {
  constexpr int V = SpotsFor(R);
  const int spots = g.spots;
  for (int s0 = 0; s0 < spots; s0 += V) {
    Fetch next;
    if (fetch && s0 + V < spots)
      next = FetchOf(j, g, dyb, s0 + V, V);
    else if (fetch && next_dyb)
      next = FetchOf(j, g, next_dyb, 0, V);
    Spots<R, V>(j, g, dyb, s0, std::min(V, spots - s0), S, pack, next);
  }
}

}  // namespace

size_t TapsDxWorkFloats(const TapsDxJob& job) {
  const Geometry g = GeometryOf(job);
  const size_t pack = size_t(job.mg) * kMaxV * kVW;
  return pack + (g.in_place ? 0 : size_t(job.c) * size_t(g.splane));
}

void TapsDxImage(const TapsDxJob& j, int b, float* work) {
  const Geometry g = GeometryOf(j);
  const int64_t dy_img = int64_t(j.mg) * j.oh * j.ow;
  float* dxb = j.dx + int64_t(b) * j.c * j.h * j.w;
  float* pack = work;
  float* S = g.in_place ? dxb : work + size_t(j.mg) * kMaxV * kVW;
  std::memset(S, 0, sizeof(float) * size_t(j.c) * size_t(g.splane));
  const float* dyb = j.dy + b * dy_img;
  const bool fetch = j.n * dy_img >= kFetchAheadFloats;
  const float* next = b + 1 < j.n ? dyb + dy_img : nullptr;
  switch (j.kh) {
    case 1: Image<1>(j, g, dyb, S, pack, fetch, next); break;
    case 2: Image<2>(j, g, dyb, S, pack, fetch, next); break;
    case 3: Image<3>(j, g, dyb, S, pack, fetch, next); break;
    case 4: Image<4>(j, g, dyb, S, pack, fetch, next); break;
    case 5: Image<5>(j, g, dyb, S, pack, fetch, next); break;
    case 6: Image<6>(j, g, dyb, S, pack, fetch, next); break;
    default: Image<7>(j, g, dyb, S, pack, fetch, next); break;
  }
  if (g.in_place) return;
  for (int c = 0; c < j.c; ++c)
    for (int y = 0; y < j.h; ++y)
      std::memcpy(dxb + (int64_t(c) * j.h + y) * j.w,
                  S + c * g.splane + int64_t(y + j.pad_t) * g.sw + j.pad_l,
                  sizeof(float) * j.w);
}

}  // namespace SINGA_ISA_NS
}  // namespace cpu
}  // namespace singa
