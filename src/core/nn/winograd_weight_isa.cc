// Winograd weight gradient for one ISA family (the math is in
// winograd_weight.h), with 2x2 dy tiles (F(3x3, 2x2): 4x4 x tiles, 16
// positions) or 4x4 dy tiles (F(3x3, 4x4): 6x6 x tiles, 36 positions).
//
// Tiles are numbered by tile row (image, ty) and column tx, and taken a
// block of tile rows at a time. For a block, the transformed x tiles go to
// V[pos][tile][c] and the transformed dy tiles to Z[pos][tile][k], channels
// fastest, so both transforms run on whole vectors of channels; then for
// each position M[pos] (+)= Z[pos]^T V[pos], a product whose reduction runs
// over the block's tiles. Blocks are sized by measurement (see
// WinogradWeightGradient). Last, dw = A^T M A; where all the tiles fit one
// block, each small block of M goes into dw as soon as it is made (Run).
//
// Each thread runs that loop on its own share: a range of tile rows (its
// group, summed into the group's own copy of M) and a range of M's rows
// (its part of the output channels). Every element of M is summed by one
// thread over its tiles in a fixed order and the groups' copies are added
// in group order, so the result does not depend on the schedule.
#ifdef _OPENMP
#include <omp.h>
#endif

#include <algorithm>
#include <cstdint>
#include <cstdlib>

#include "conv_engine.h"
#include "isa_vec.h"
#include "winograd_weight.h"

#ifndef SINGA_ISA_NS
#error "winograd_weight_isa.cc is compiled per ISA: define SINGA_ISA_NS and SINGA_ISA_LEVEL"
#endif

namespace singa {
namespace cpu {
namespace SINGA_ISA_NS {

namespace {

// Register tile of the products: kMR rows of M (output channels) by two
// vectors of input channels, which with a broadcast and two loads fills the
// 16 (32 with AVX-512) vector registers.
constexpr int kMR = kVW == 16 ? 12 : 6;
constexpr int kNR = 2 * kVW;
// Below this many multiply-adds (direct count) a call runs on one thread.
constexpr int64_t kParallelMacs = int64_t(1) << 18;
// Columns of M per block where M is made and transformed a block at a time
// (see Run; a multiple of kNR in every family).
constexpr int kFusedCols = 32;

inline Vec Splat(float v) { return Vec{} + v; }

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t RoundUp(int64_t a, int64_t b) { return CeilDiv(a, b) * b; }

// A row stride of an odd number of 64-byte lines, so that walking down a
// column of V or Z spreads over every L1 set.
int64_t OddLines(int64_t floats) {
  floats = RoundUp(floats, 16);
  return (floats / 16) % 2 ? floats : floats + 16;
}

// The calling thread's scratch, 64-byte aligned and kept between calls so a
// training loop does not pay for fresh pages every step. (A plain malloc'd
// block: std::vector would put weak template copies outside this family's
// namespace.) Null when the memory cannot be had.
struct Scratch {
  float* data = nullptr;
  size_t floats = 0;
  ~Scratch() { std::free(data); }
  float* Get(size_t want) {
    if (want > floats) {
      std::free(data);
      floats = 0;
      data = static_cast<float*>(
          std::aligned_alloc(64, size_t(RoundUp(int64_t(want), 16)) * 4));
      if (data) floats = want;
    }
    return data;
  }
};

struct Plan {
  const ConvParams* p;
  int oh, ow;
  int tx, ty;    // tiles per row, tile rows per image (of dy tiles)
  int cp;        // input channels rounded up to kNR: the columns of V and M
  int kp;        // output channels rounded up to kMR: the rows of M
  int64_t ldv;
  int64_t tb;    // tiles per block (the position planes' height)
  int groups;    // tile groups, each summing into its own copy of M
  float* m;      // M: [groups][positions][kp][cp]
};

// Where Output finds M[pos][k][c] for k >= k0 and c >= c0: at
// m[(groups' copies) pos * plane + (k - k0) * ld + c - c0].
struct Sums {
  const float* m;
  int64_t plane, ld;
  int groups, k0, c0;
};

// Shuffle masks that interleave the low (kZipLo) or high (kZipHi) halves of
// two vectors: {a0 b0 a1 b1 ...}.
#if SINGA_ISA_LEVEL >= 2
constexpr IVec kZipLo = {0, 16, 1, 17, 2, 18, 3, 19,
                         4, 20, 5, 21, 6, 22, 7, 23};
constexpr IVec kZipHi = {8,  24, 9,  25, 10, 26, 11, 27,
                         12, 28, 13, 29, 14, 30, 15, 31};
#elif SINGA_ISA_LEVEL == 1
constexpr IVec kZipLo = {0, 8, 1, 9, 2, 10, 3, 11};
constexpr IVec kZipHi = {4, 12, 5, 13, 6, 14, 7, 15};
#else
constexpr IVec kZipLo = {0, 4, 1, 5};
constexpr IVec kZipHi = {2, 6, 3, 7};
#endif

// Transposes the kVW x kVW block r in place (log2(kVW) rounds of zipping
// row i with row i + kVW / 2).
inline void Transpose(Vec* r) {
  for (int round = 1; round < kVW; round *= 2) {
    Vec t[kVW];
#pragma GCC unroll 16
    for (int i = 0; i < kVW / 2; ++i) {
      t[2 * i] = __builtin_shuffle(r[i], r[i + kVW / 2], kZipLo);
      t[2 * i + 1] = __builtin_shuffle(r[i], r[i + kVW / 2], kZipHi);
    }
#pragma GCC unroll 16
    for (int i = 0; i < kVW; ++i) r[i] = t[i];
  }
}

// Copies `rows` rows of channels [c0, c0 + kVW) of image plane `src` (rows
// y0.., columns x0.. for `cols` columns) into s[row][col][lane], zero
// outside the plane and for channels at or past `chans`. Whole kVW x kVW
// blocks inside the plane go through a register transpose, the rest of a row
// (planes narrower than a vector, or not a multiple of one) through pieces
// of four columns and an in-lane transpose (PieceColumns), and the zeros are
// stored a vector at a time. Against a float-by-float copy of those columns
// and zeros the weight gradients of ResNet-18's 3x3 layers at batch 32 and
// 64 took 0.92-0.99x the time at one thread and 0.85-0.95x at two with
// AVX-512, 0.95-1.00x with the AVX2 kernels but for 512@4 at batch 32,
// 1.01-1.03x until its whole pieces took plain loads (0.94-0.95x again; see
// PieceColumns) (Zen 5, alternating call by call). With `ahead` (an array
// over kFetchAheadBytes, conv_engine.h), the same rows of the next kVW
// channels, which the next call gathers, are fetched first: the weight
// gradients of ResNet-18's 3x3 stride-1 layers at batch 32 and 64 (x and dy
// of 4 to 16 MiB) then took 0.92-0.98x the time at one thread and 0.83-0.96x
// at two with AVX-512, 0.89-0.97x with the AVX2 kernels; at batch 8 (2 MiB,
// mostly still in cache) it cost 3-7% (Zen 5, alternating call by call).
void GatherRows(const float* src, int64_t cstride, int h, int w, int chans,
                int c0, int y0, int rows, int x0, int cols, bool ahead,
                float* s) {
  const int lo = std::clamp(-x0, 0, cols), hi = std::clamp(w - x0, 0, cols);
  const bool full = c0 + kVW <= chans;
  if (ahead && hi > lo)
    for (int c = c0 + kVW, c1 = std::min(chans, c0 + 2 * kVW); c < c1; ++c)
      for (int i = 0; i < rows; ++i) {
        const int y = y0 + i;
        if (y < 0 || y >= h) continue;
        const float* r = src + c * cstride + int64_t(y) * w + x0;
        PrefetchL1Span(r + lo, hi - lo);
      }
  const Vec zero{};
  for (int i = 0; i < rows; ++i) {
    const int y = y0 + i;
    float* row = s + int64_t(i) * cols * kVW;
    const bool inside = y >= 0 && y < h;
    for (int col = 0; col < cols; ++col)
      if (!inside || col < lo || col >= hi) Store(row + col * kVW, zero);
    if (!inside) continue;
    const float* r = src + c0 * cstride + int64_t(y) * w + x0;
    if (!full) {
      for (int lane = 0; lane < kVW; ++lane) {
        float* d = row + lane;
        const int c = c0 + lane;
        for (int col = lo; col < hi; ++col)
          d[col * kVW] = c < chans ? r[(c - c0) * cstride + col] : 0.f;
      }
      continue;
    }
    int done = lo;
    for (; done + kVW <= hi; done += kVW) {
      Vec b[kVW];
#pragma GCC unroll 16
      for (int l = 0; l < kVW; ++l) b[l] = Load(r + l * cstride + done);
      Transpose(b);
#pragma GCC unroll 16
      for (int j = 0; j < kVW; ++j) Store(row + (done + j) * kVW, b[j]);
    }
#if SINGA_ISA_LEVEL >= 1 && defined(__AVX2__)
    for (; done < hi; done += 4) {
      const int m = std::min(4, hi - done);
      Vec col[4];
      PieceColumns(r + done, cstride, m, col);
      for (int e = 0; e < m; ++e) Store(row + (done + e) * kVW, col[e]);
    }
#else
    if (done < hi) {
      const int m = hi - done;
      Vec b[kVW];
      for (int l = 0; l < kVW; ++l) b[l] = LoadFirst(r + l * cstride + done, m);
      Transpose(b);
      for (int j = 0; j < m; ++j) Store(row + (done + j) * kVW, b[j]);
    }
#endif
  }
}

// The two tilings. For each: V for tile row r (tiles lt0.. of the block),
// channels [c0, c0 + kVW), into the columns from v (Input); Z for tile row
// r, output channels [k0, k0 + kVW), into the columns from zo of Z, row
// stride ldz (Grad); dw[k][c0 .. c0 + kVW) from M[.][k][c], for the
// channels below C (Output). s is the thread's gather buffer.
//
// kBlockFloats bounds V and Z of a block of tiles (see Run), measured on
// the ResNet-18 layers on an AVX2 EPYC (1 MiB L2): with 2x2 tiles 64@32
// runs best near 48 tiles (0.8x the time at 256), 512@4 from 128 up (0.8x
// the time at 32); with 4x4 tiles the 64-channel layers took 0.85-0.9x the
// time at 1 MiB than at 512 KiB (the 32 tiles that K C / (K + C) asks for),
// at batch 8 to 64 and 1 or 2 threads.
struct Tiles2 {
  static constexpr int kOut = 2, kIn = 4, kPos = 16;
  static constexpr int64_t kBlockFloats = int64_t(1) << 17;
  static void Input(const Plan& pl, const float* x, int64_t r, int64_t lt0,
                    int c0, float* v, float* s);
  static void Grad(const Plan& pl, const float* dy, int64_t r, int64_t lt0,
                   int k0, float* zo, int64_t ldz, float* s);
  static void Output(const Plan& pl, const Sums& sums, int k, int c0,
                     float* dw);
};
struct Tiles4 {
  static constexpr int kOut = 4, kIn = 6, kPos = 36;
  static constexpr int64_t kBlockFloats = int64_t(1) << 18;
  static void Input(const Plan& pl, const float* x, int64_t r, int64_t lt0,
                    int c0, float* v, float* s);
  static void Grad(const Plan& pl, const float* dy, int64_t r, int64_t lt0,
                   int k0, float* zo, int64_t ldz, float* s);
  static void Output(const Plan& pl, const Sums& sums, int k, int c0,
                     float* dw);
};

// The x tiles of row r, kIn x kIn each at stride kOut, gathered for
// channels [c0, c0 + kVW) into s[row][col][lane].
template <class T>
void GatherInput(const Plan& pl, const float* x, int64_t r, int c0, float* s) {
  const ConvParams& p = *pl.p;
  const int n = int(r / pl.ty), ty = int(r % pl.ty);
  const int64_t plane = int64_t(p.h) * p.w;
  GatherRows(x + int64_t(n) * p.c * plane, plane, p.h, p.w, p.c, c0,
             T::kOut * ty - p.pad_t, T::kIn, -p.pad_l, T::kOut * pl.tx + 2,
             int64_t(sizeof(float)) * p.n * p.c * plane > kFetchAheadBytes, s);
}

// The dy tiles of row r, kOut x kOut each, for output channels
// [k0, k0 + kVW) into s[row][col][lane].
template <class T>
void GatherGrad(const Plan& pl, const float* dy, int64_t r, int k0, float* s) {
  const ConvParams& p = *pl.p;
  const int n = int(r / pl.ty), ty = int(r % pl.ty);
  const int64_t plane = int64_t(pl.oh) * pl.ow;
  GatherRows(dy + int64_t(n) * p.oc * plane, plane, pl.oh, pl.ow, p.oc, k0,
             T::kOut * ty, T::kOut, 0, T::kOut * pl.tx,
             int64_t(sizeof(float)) * p.n * p.oc * plane > kFetchAheadBytes, s);
}

void Tiles2::Input(const Plan& pl, const float* x, int64_t r, int64_t lt0,
                   int c0, float* v, float* s) {
  GatherInput<Tiles2>(pl, x, r, c0, s);
  const int cols = 2 * pl.tx + 2;
  // Locals: the stores below could otherwise alias the plan.
  const int64_t ldv = pl.ldv, plane = pl.tb * pl.ldv;
  const int tx = pl.tx;
  for (int t = 0; t < tx; ++t) {
    Vec d[4][4], u[4][4];
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i)
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j)
        d[i][j] = Load(s + (int64_t(i) * cols + 2 * t + j) * kVW);
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      const Vec a0 = d[0][j] - d[2][j], a1 = d[1][j] + d[2][j],
                a2 = d[2][j] - d[1][j], a3 = d[3][j] - d[1][j];
      d[0][j] = a0;
      d[1][j] = a1;
      d[2][j] = a2;
      d[3][j] = a3;
    }
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) {
      u[i][0] = d[i][0] - d[i][2];
      u[i][1] = d[i][1] + d[i][2];
      u[i][2] = d[i][2] - d[i][1];
      u[i][3] = d[i][3] - d[i][1];
    }
    float* out = v + (lt0 + t) * ldv;
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i)
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j)
        Store(out + (4 * i + j) * plane, u[i][j]);
  }
}

void Tiles2::Grad(const Plan& pl, const float* dy, int64_t r, int64_t lt0,
                  int k0, float* zo, int64_t ldz, float* s) {
  GatherGrad<Tiles2>(pl, dy, r, k0, s);
  const int cols = 2 * pl.tx;
  const Vec half = Splat(0.5f);
  const int64_t plane = pl.tb * ldz;
  const int tx = pl.tx;
  for (int t = 0; t < tx; ++t) {
    Vec g[2][2], h[4][2], z[4][4];
#pragma GCC unroll 2
    for (int i = 0; i < 2; ++i)
#pragma GCC unroll 2
      for (int j = 0; j < 2; ++j)
        g[i][j] = Load(s + (int64_t(i) * cols + 2 * t + j) * kVW);
#pragma GCC unroll 2
    for (int j = 0; j < 2; ++j) {
      h[0][j] = g[0][j];
      h[1][j] = (g[0][j] + g[1][j]) * half;
      h[2][j] = (g[0][j] - g[1][j]) * half;
      h[3][j] = g[1][j];
    }
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) {
      z[i][0] = h[i][0];
      z[i][1] = (h[i][0] + h[i][1]) * half;
      z[i][2] = (h[i][0] - h[i][1]) * half;
      z[i][3] = h[i][1];
    }
    float* out = zo + (lt0 + t) * ldz;
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i)
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j)
        Store(out + (4 * i + j) * plane, z[i][j]);
  }
}

// B^T d for the 6x6 tiles: rows 4 d0 - 5 d2 + d4, -4 d1 - 4 d2 + d3 + d4,
// 4 d1 - 4 d2 - d3 + d4, -2 d1 - d2 + 2 d3 + d4, 2 d1 - d2 - 2 d3 + d4,
// 4 d1 - 5 d3 + d5 (points 0, -1, 1, -2, 2 and infinity).
inline void InputT6(const Vec* d, Vec* o) {
  const Vec four = Splat(4.f), five = Splat(5.f), two = Splat(2.f);
  const Vec t0 = d[4] - four * d[2], t1 = d[3] - four * d[1];
  const Vec t2 = d[4] - d[2], t3 = two * (d[3] - d[1]);
  o[0] = four * d[0] - five * d[2] + d[4];
  o[1] = t0 + t1;
  o[2] = t0 - t1;
  o[3] = t2 + t3;
  o[4] = t2 - t3;
  o[5] = four * d[1] - five * d[3] + d[5];
}

// G g for the 4-point dy tiles (winograd_weight.h's G): g0, g0 + g1 + g2 +
// g3, g0 - g1 + g2 - g3, g0 + 2 g1 + 4 g2 + 8 g3, g0 - 2 g1 + 4 g2 - 8 g3,
// g3. A's factors (1/4, -1/6, -1/6, 1/24, 1/24, 1 per position) are
// applied in Output.
inline void GradT6(const Vec* g, Vec* o) {
  const Vec two = Splat(2.f), four = Splat(4.f);
  const Vec e = g[0] + g[2], od = g[1] + g[3];
  const Vec e2 = g[0] + four * g[2], o2 = two * (g[1] + four * g[3]);
  o[0] = g[0];
  o[1] = e + od;
  o[2] = e - od;
  o[3] = e2 + o2;
  o[4] = e2 - o2;
  o[5] = g[3];
}

// Applies f (N values to 6) down the columns, then along the rows, of the
// N x N window at column col0 of the gathered rows s (cols wide, kVW lanes
// per value), and stores the 36 results at out + (6 i + j) * plane.
template <int N, class F>
inline void Transform6(const float* s, int cols, int col0, F f, float* out,
                       int64_t plane) {
  Vec h[6][N], z[6][6];
#pragma GCC unroll 6
  for (int j = 0; j < N; ++j) {
    Vec col[N], o[6];
#pragma GCC unroll 6
    for (int i = 0; i < N; ++i)
      col[i] = Load(s + (int64_t(i) * cols + col0 + j) * kVW);
    f(col, o);
#pragma GCC unroll 6
    for (int i = 0; i < 6; ++i) h[i][j] = o[i];
  }
#pragma GCC unroll 6
  for (int i = 0; i < 6; ++i) f(h[i], z[i]);
#pragma GCC unroll 6
  for (int i = 0; i < 6; ++i)
#pragma GCC unroll 6
    for (int j = 0; j < 6; ++j) Store(out + (6 * i + j) * plane, z[i][j]);
}

void Tiles4::Input(const Plan& pl, const float* x, int64_t r, int64_t lt0,
                   int c0, float* v, float* s) {
  GatherInput<Tiles4>(pl, x, r, c0, s);
  const int cols = 4 * pl.tx + 2;
  const int64_t ldv = pl.ldv, plane = pl.tb * pl.ldv;
  for (int t = 0, tx = pl.tx; t < tx; ++t)
    Transform6<6>(s, cols, 4 * t, [](const Vec* a, Vec* o) { InputT6(a, o); },
                  v + (lt0 + t) * ldv, plane);
}

void Tiles4::Grad(const Plan& pl, const float* dy, int64_t r, int64_t lt0,
                  int k0, float* zo, int64_t ldz, float* s) {
  GatherGrad<Tiles4>(pl, dy, r, k0, s);
  const int cols = 4 * pl.tx;
  const int64_t plane = pl.tb * ldz;
  for (int t = 0, tx = pl.tx; t < tx; ++t)
    Transform6<4>(s, cols, 4 * t, [](const Vec* g, Vec* o) { GradT6(g, o); },
                  zo + (lt0 + t) * ldz, plane);
}

// m[i][0:kNR] (+)= sum_t z[t * ldz + i] * v[t * ldv + 0:kNR] for i < kMR.
template <bool kAccumulate>
void Panel(const float* __restrict z, int64_t ldz, const float* __restrict v,
           int64_t ldv, int64_t tiles, float* __restrict m, int64_t ldm) {
  Vec s[kMR][2];
#pragma GCC unroll 16
  for (int i = 0; i < kMR; ++i)
#pragma GCC unroll 2
    for (int j = 0; j < 2; ++j)
      s[i][j] = kAccumulate ? Load(m + i * ldm + j * kVW) : Vec{};
  for (int64_t t = 0; t < tiles; ++t) {
    const Vec b0 = Load(v + t * ldv), b1 = Load(v + t * ldv + kVW);
#pragma GCC unroll 16
    for (int i = 0; i < kMR; ++i) {
      const Vec a = Splat(z[t * ldz + i]);
      s[i][0] += a * b0;
      s[i][1] += a * b1;
    }
  }
#pragma GCC unroll 16
  for (int i = 0; i < kMR; ++i)
#pragma GCC unroll 2
    for (int j = 0; j < 2; ++j) Store(m + i * ldm + j * kVW, s[i][j]);
}

// Channel k's sums M[pos][k][c0 .. c0 + kVW) for every position, the tile
// groups' partial sums added in group order.
template <int kPos>
void LoadSums(const Sums& sums, int k, int c0, Vec* m) {
  const int64_t plane = sums.plane;
  const float* src = sums.m + (k - sums.k0) * sums.ld + (c0 - sums.c0);
#pragma GCC unroll 36
  for (int q = 0; q < kPos; ++q) m[q] = Load(src + q * plane);
  for (int g = 1; g < sums.groups; ++g)
#pragma GCC unroll 36
    for (int q = 0; q < kPos; ++q) m[q] += Load(src + (kPos * g + q) * plane);
}

// Writes the 3x3 results (out[3 u + v] for lanes) of channels c0.. of k.
inline void StoreDw(const Plan& pl, int k, int c0, const Vec* out, float* dw) {
  const ConvParams& p = *pl.p;
  float o[9][kVW];
  for (int e = 0; e < 9; ++e) Store(o[e], out[e]);
  const int lanes = std::min(kVW, p.c - c0);
  float* d = dw + (int64_t(k) * p.c + c0) * 9;
  for (int lane = 0; lane < lanes; ++lane)
    for (int e = 0; e < 9; ++e) d[lane * 9 + e] = o[e][lane];
}

void Tiles2::Output(const Plan& pl, const Sums& sums, int k, int c0,
                    float* dw) {
  Vec m[16], r[3][4], out[9];
  LoadSums<16>(sums, k, c0, m);
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) {
    r[0][j] = m[j] + m[4 + j] + m[8 + j];
    r[1][j] = m[4 + j] - m[8 + j];
    r[2][j] = m[4 + j] + m[8 + j] + m[12 + j];
  }
#pragma GCC unroll 3
  for (int i = 0; i < 3; ++i) {
    out[3 * i] = r[i][0] + r[i][1] + r[i][2];
    out[3 * i + 1] = r[i][1] - r[i][2];
    out[3 * i + 2] = r[i][1] + r[i][2] + r[i][3];
  }
  StoreDw(pl, k, c0, out, dw);
}

// A^T applied to six sums already scaled by A's factors, so with A's
// integer part only: m0 + m1 + m2 + m3 + m4, m1 - m2 + 2 m3 - 2 m4,
// m1 + m2 + 4 m3 + 4 m4 + m5.
inline void OutputT6(const Vec* m, Vec* o) {
  const Vec two = Splat(2.f), four = Splat(4.f);
  const Vec a = m[1] + m[2], b = m[1] - m[2], c = m[3] + m[4], d = m[3] - m[4];
  o[0] = m[0] + a + c;
  o[1] = b + two * d;
  o[2] = a + four * c + m[5];
}

void Tiles4::Output(const Plan& pl, const Sums& sums, int k, int c0,
                    float* dw) {
  static constexpr float kScale[6] = {1.f / 4, -1.f / 6, -1.f / 6,
                                      1.f / 24, 1.f / 24, 1.f};
  Vec m[36], r[3][6], out[9];
  LoadSums<36>(sums, k, c0, m);
#pragma GCC unroll 6
  for (int i = 0; i < 6; ++i)
#pragma GCC unroll 6
    for (int j = 0; j < 6; ++j) m[6 * i + j] *= Splat(kScale[i] * kScale[j]);
#pragma GCC unroll 6
  for (int j = 0; j < 6; ++j) {
    Vec col[6], o[3];
#pragma GCC unroll 6
    for (int i = 0; i < 6; ++i) col[i] = m[6 * i + j];
    OutputT6(col, o);
#pragma GCC unroll 3
    for (int u = 0; u < 3; ++u) r[u][j] = o[u];
  }
#pragma GCC unroll 3
  for (int u = 0; u < 3; ++u) OutputT6(r[u], out + 3 * u);
  StoreDw(pl, k, c0, out, dw);
}

template <class T>
bool Run(const float* x, const float* dy, float* dw, const ConvParams& p) {
  constexpr int kPos = T::kPos;
  Plan pl;
  pl.p = &p;
  pl.oh = p.h + p.pad_t + p.pad_b - 2;  // stride 1, no dilation
  pl.ow = p.w + p.pad_l + p.pad_r - 2;
  pl.tx = (pl.ow + T::kOut - 1) / T::kOut;
  pl.ty = (pl.oh + T::kOut - 1) / T::kOut;
  pl.cp = int(RoundUp(p.c, kNR));
  pl.kp = int(RoundUp(p.oc, kMR));
  pl.ldv = OddLines(pl.cp);
  // Tiles per block: as many as keep the block's V and Z, all positions,
  // within kBlockFloats, or, where M is large next to them, enough to
  // amortise reading and writing M once per block (K C / (K + C) tiles make
  // the two traffics equal).
  const int64_t fit = T::kBlockFloats / (kPos * (pl.ldv + OddLines(pl.kp)));
  const int64_t amortise = int64_t(p.c) * p.oc / (p.c + p.oc);
  const int64_t target = std::clamp<int64_t>(std::max(fit, amortise), 16, 256);
  const int64_t rows = int64_t(p.n) * pl.ty;
  const int64_t rb = std::clamp<int64_t>(target / pl.tx, 1, rows);
  pl.tb = rb * pl.tx;
  const int64_t macs = int64_t(p.n) * pl.oh * pl.ow * p.oc * p.c * 9;
#ifdef _OPENMP
  const int threads = macs >= kParallelMacs ? omp_get_max_threads() : 1;
#else
  const int threads = 1;
#endif
  // Threads form `groups` x `parts`: a group sums a range of tile rows into
  // its own copy of M (the copies are added in group order at the end), a
  // part a range of M's row panels (output channels), transforming the x
  // tiles of its group whole and the dy tiles for its channels. Groups cost
  // one more pass over a copy of M (kPos K C floats); parts repeat the x
  // transform (kPos C floats written per tile), so parts are taken only
  // when there are fewer than 4 K tiles (on ResNet-18 at batch 32 or 64:
  // the 512@4 layer). Copies of M are kept within about 64 MiB. No barrier
  // but the one before the last sum, so a descheduled thread does not hold
  // the others up every block.
  const int kpanels = pl.kp / kMR;
  const int64_t msz = int64_t(kPos) * pl.kp * pl.cp;
  int parts = 1;
  if (rows * pl.tx < 4 * int64_t(p.oc))
    for (int q : {4, 3, 2})
      if (threads % q == 0 && q <= kpanels) {
        parts = q;
        break;
      }
  pl.groups = int(std::clamp<int64_t>(
      std::min<int64_t>(threads / parts, (int64_t(1) << 24) / msz), 1, rows));
  const int team = pl.groups * parts;
  const int part_panels = int((kpanels + parts - 1) / parts);
  const int64_t ldz = OddLines(RoundUp(int64_t(part_panels) * kMR, kVW));
  // M for every group, then each thread's V, Z and gathered rows.
  const int64_t vsz = kPos * pl.tb * pl.ldv, zsz = kPos * pl.tb * ldz;
  const int64_t gather = RoundUp(T::kIn * (T::kOut * pl.tx + 2) * kVW, 16);
  // With one group whose tiles fit one block, no element of M is summed
  // over more than one pass: M is then made and turned into dw a row panel
  // and kFusedCols columns at a time, in a buffer of each thread's that
  // stays in cache, rather than written whole (kPos K C floats: 38 MB for
  // 512 channels) and read back. ResNet-18's 512@4 weight gradient took
  // 0.74x the time at one thread and 0.62x at two at batch 32, 0.91x and
  // 0.93x at batch 64, 0.85x and 0.81x at batch 8 (AVX-512); 0.85-0.98x with
  // the AVX2 kernels; 256@8 0.98-1.02x (Zen 5, alternating call by call).
  // 64 columns were as fast at batch 32 and slower at 64 (0.91x against
  // 0.87x at one thread), 128 and 256 slower still.
  const bool fused = pl.groups == 1 && rows <= rb;
  const int cb = fused ? std::min(pl.cp, kFusedCols) : 0;
  const int64_t own = vsz + zsz + gather + (fused ? int64_t(kPos) * kMR * cb : 0);
  const int64_t msz_all = fused ? 0 : pl.groups * msz;
  thread_local Scratch scratch;
  float* buf = scratch.Get(size_t(msz_all + team * own));
  if (!buf) return false;
  pl.m = fused ? nullptr : buf;

  const int cchunks = pl.cp / kVW;
#pragma omp parallel num_threads(team) if (team > 1)
  {
#ifdef _OPENMP
    const int id = omp_get_thread_num();
#else
    const int id = 0;
#endif
    const int g = id / parts, part = id % parts;
    float* const v = buf + msz_all + id * own;
    float* const z = v + vsz;
    float* const s = z + zsz;
    float* const mloc = s + gather;
    float* const m = fused ? nullptr : pl.m + g * msz;
    const int kb0 = std::min(kpanels, part * part_panels);
    const int kb1 = std::min(kpanels, kb0 + part_panels);
    const int k0 = kb0 * kMR, kchunks = int(CeilDiv((kb1 - kb0) * kMR, kVW));
    const int64_t ra = rows * g / pl.groups, rz = rows * (g + 1) / pl.groups;
    for (int64_t r0 = ra; r0 < rz && kb0 < kb1; r0 += rb) {
      const int64_t r1 = std::min(rz, r0 + rb);
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t lt0 = (r - r0) * pl.tx;
        for (int ch = 0; ch < cchunks; ++ch)
          T::Input(pl, x, r, lt0, ch * kVW, v + ch * kVW, s);
        for (int ch = 0; ch < kchunks; ++ch)
          T::Grad(pl, dy, r, lt0, k0 + ch * kVW, z + ch * kVW, ldz, s);
      }
      const int64_t tiles = (r1 - r0) * pl.tx;
      if (fused) {
        for (int cb0 = 0; cb0 < pl.cp; cb0 += cb) {
          const int cb1 = std::min(pl.cp, cb0 + cb), cend = std::min(cb1, p.c);
          for (int kb = kb0; kb < kb1; ++kb) {
            for (int pos = 0; pos < kPos; ++pos) {
              const float* zp = z + pos * pl.tb * ldz + (kb - kb0) * kMR;
              const float* vp = v + pos * pl.tb * pl.ldv;
              float* mp = mloc + pos * kMR * cb;
              for (int c0 = cb0; c0 < cb1; c0 += kNR)
                Panel<false>(zp, ldz, vp + c0, pl.ldv, tiles, mp + (c0 - cb0), cb);
            }
            const Sums sums{mloc, int64_t(kMR) * cb, cb, 1, kb * kMR, cb0};
            for (int k = kb * kMR, k1 = std::min(p.oc, k + kMR); k < k1; ++k)
              for (int c0 = cb0; c0 < cend; c0 += kVW) T::Output(pl, sums, k, c0, dw);
          }
        }
        continue;
      }
      const bool first = r0 == ra;
      for (int pos = 0; pos < kPos; ++pos)
        for (int kb = kb0; kb < kb1; ++kb) {
          const float* zp = z + pos * pl.tb * ldz + (kb - kb0) * kMR;
          const float* vp = v + pos * pl.tb * pl.ldv;
          float* mp = m + (int64_t(pos) * pl.kp + kb * kMR) * pl.cp;
          for (int c0 = 0; c0 < pl.cp; c0 += kNR) {
            if (first)
              Panel<false>(zp, ldz, vp + c0, pl.ldv, tiles, mp + c0, pl.cp);
            else
              Panel<true>(zp, ldz, vp + c0, pl.ldv, tiles, mp + c0, pl.cp);
          }
        }
    }
    if (!fused) {
      const Sums sums{pl.m, int64_t(pl.kp) * pl.cp, pl.cp, pl.groups, 0, 0};
#pragma omp barrier
#pragma omp for schedule(static)
      for (int k = 0; k < p.oc; ++k)
        for (int c0 = 0; c0 < p.c; c0 += kVW) T::Output(pl, sums, k, c0, dw);
    }
  }
  return true;
}

}  // namespace

bool WinogradWeightGradient(const float* x, const float* dy, float* dw,
                            const ConvParams& p, int tile) {
  return tile == 4 ? Run<Tiles4>(x, dy, dw, p) : Run<Tiles2>(x, dy, dw, p);
}

}  // namespace SINGA_ISA_NS
}  // namespace cpu
}  // namespace singa
