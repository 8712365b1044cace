// Winograd F(4x4, 3x3) and F(2x2, 3x3) kernels for one ISA family (see
// winograd.h for the algorithm and the layouts, cpu_isa.h for the
// families). Everything below is written once for an output tile of T x T
// pixels from windows of (T + 2) x (T + 2) inputs; T is 4 or 2.
//
// The transforms of the input and output tiles run on vectors whose lanes
// are tiles, so one panel of PW tiles is transformed with the same code as
// a single tile; the tiles' 6x6 windows are first gathered into a small
// lane-major buffer (zero where a window leaves the plane; see
// winograd_windows.h). The product
// over channels uses a 6-row x 2-vector register tile: six broadcast
// weights against two vectors of tiles per channel.
#include <algorithm>
#include <cstring>

#include "isa_vec.h"
#include "winograd.h"
#include "winograd_windows.h"

#ifndef SINGA_ISA_NS
#error "winograd_isa.cc is compiled per ISA: define SINGA_ISA_NS and SINGA_ISA_LEVEL"
#endif

namespace singa {
namespace cpu {
namespace SINGA_ISA_NS {

namespace {

constexpr int kR = 6;  // rows of U per register tile
// Padding between the slices of V and M (one per transform position), so
// the transforms' 16 or 36 streams do not all fall into the same cache sets.
constexpr int64_t kSlicePad = 16;

inline Vec Splat(float x) { return Vec{} + x; }

// The transforms of one tiling, on floats or vectors alike: B^T d for a
// window's column or row d[0], d[s], ...; A^T m for a column or row of
// transform values; G g for three kernel taps.
template <int T>
struct Tiling;

// F(4, 3), Lavin's points 0, +-1, +-2 and infinity.
template <>
struct Tiling<4> {
  static constexpr int kA = 6;  // window side
  template <typename V>
  static void Input(const V* d, int s, V* o, int os);
  template <typename V>
  static void Output(const V* m, int s, V* o, int os);
  template <typename V>
  static void Weight(const V* g, int s, V* o, int os);
};

// F(2, 3), points 0, +-1 and infinity:
//   B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1]
//   G   = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1]
//   A^T = [1 1 1 0; 0 1 -1 -1]
template <>
struct Tiling<2> {
  static constexpr int kA = 4;
  template <typename V>
  static void Input(const V* d, int s, V* o, int os) {
    const V d1 = d[s], d2 = d[2 * s];
    o[0] = d[0] - d2;
    o[os] = d1 + d2;
    o[2 * os] = d2 - d1;
    o[3 * os] = d1 - d[3 * s];
  }
  template <typename V>
  static void Output(const V* m, int s, V* o, int os) {
    const V m1 = m[s], m2 = m[2 * s];
    o[0] = (m[0] + m1) + m2;
    o[os] = (m1 - m2) - m[3 * s];
  }
  template <typename V>
  static void Weight(const V* g, int s, V* o, int os) {
    const V g0 = g[0], g2 = g[2 * s], even = (g0 + g2) * 0.5f, half = g[s] * 0.5f;
    o[0] = g0;
    o[os] = even + half;
    o[2 * os] = even - half;
    o[3 * os] = g2;
  }
};

template <typename V>
void Tiling<4>::Input(const V* d, int s, V* o, int os) {
  const V d0 = d[0], d1 = d[s], d2 = d[2 * s], d3 = d[3 * s], d4 = d[4 * s],
          d5 = d[5 * s];
  const V a = d4 - d2, b = d3 - d1;
  o[0] = (d4 - 5.f * d2) + 4.f * d0;
  o[os] = (d3 + d4) - 4.f * (d1 + d2);
  o[2 * os] = (d4 - d3) + 4.f * (d1 - d2);
  o[3 * os] = a + 2.f * b;
  o[4 * os] = a - 2.f * b;
  o[5 * os] = (d5 - 5.f * d3) + 4.f * d1;
}

template <typename V>
void Tiling<4>::Output(const V* m, int s, V* o, int os) {
  const V m1 = m[s], m2 = m[2 * s], m3 = m[3 * s], m4 = m[4 * s];
  const V a = m1 + m2, b = m1 - m2, c = m3 + m4, e = m3 - m4;
  o[0] = m[0] + a + c;
  o[os] = b + 2.f * e;
  o[2 * os] = a + 4.f * c;
  o[3 * os] = (b + 8.f * e) + m[5 * s];
}

template <typename V>
void Tiling<4>::Weight(const V* g, int s, V* o, int os) {
  const V g0 = g[0], g1 = g[s], g2 = g[2 * s];
  const V even = g0 + g2, outer = g0 * (1.f / 24.f) + g2 * (1.f / 6.f);
  o[0] = g0 * 0.25f;
  o[os] = (even + g1) * (-1.f / 6.f);
  o[2 * os] = (even - g1) * (-1.f / 6.f);
  o[3 * os] = outer + g1 * (1.f / 12.f);
  o[4 * os] = outer - g1 * (1.f / 12.f);
  o[5 * os] = g2;
}

// Floats per slice of U.
int64_t USlice(int K, int C) {
  return int64_t((K + kR - 1) / kR) * C * kR + kSlicePad;
}

// x[e] = tap e of the 3x3 kernel at taps[l] in lane l (tap 8 - e when
// flipped), from three pieces of four taps a kernel: 0-3, 4-7 and 5-8 (when
// flipped 5-8, 1-4 and 0-3, whose transposed columns come out reversed).
// Against taps gathered one by one into a buffer and loaded back as
// vectors, with U's rows also stored as they are made (RowBlockWeights),
// ResNet-18's 512@4 layer at batch 32 took 0.89-0.92x the time (forward
// and data gradient, 1 and 2 threads) and 0.94-0.96x with the AVX2
// kernels, its 256@8 layer 0.95-0.97x; in its training step the weight
// transform went from about 3.8% of the time to 2.8% (Zen 5, alternating
// call by call; perf at one thread).
inline void TapVectors(const float* const* taps, bool flip, Vec* x) {
  Vec q[4], col[4];
  const int off[3] = {flip ? 5 : 0, flip ? 1 : 4, flip ? 0 : 5};
  for (int piece = 0; piece < 3; ++piece) {
    for (int k = 0; k < 4; ++k) q[k] = QuadsOf(taps, k, off[piece]);
    Transpose4(q, col);
    if (piece < 2)
      for (int e = 0; e < 4; ++e) x[4 * piece + e] = col[flip ? 3 - e : e];
    else
      x[8] = col[flip ? 0 : 3];
  }
}

// Row block kb of U: dst[xi * slice + c * R + r] for k = kb * R + r and
// each of the A * A transform positions xi.
// Lanes are consecutive (c, r) pairs, which are also consecutive in U:
// their kernels are read as pieces of four taps and transposed into one
// vector per tap (TapVectors), transformed together, and each transform
// position is stored as one vector.
template <int T>
void RowBlockWeights(const float* w, int K, int C, bool flip, int kb,
                     float* dst, int64_t slice) {
  using Tl = Tiling<T>;
  constexpr int A = Tl::kA;
  constexpr int kPairs = 8 * kVW;
  alignas(64) static const float kNoTaps[12] = {};
  const int pairs = C * kR;
  for (int p0 = 0; p0 < pairs; p0 += kPairs) {
    const int np = std::min(kPairs, pairs - p0);
    const int padded = (np + kVW - 1) / kVW * kVW;
    // The next group's taps are fetched first: they lie in kR rows of w
    // (columns when flipped) that training has just rewritten, and the
    // gather below otherwise waits on each. ResNet-18's batch-32
    // training step took 0.95x the time at one thread and 0.96x at two, its
    // 512-channel 4x4 layer's forward and data gradient 0.90-0.93x (Zen 5,
    // alternating call by call).
    if (p0 + kPairs < pairs) {
      const int c0 = (p0 + kPairs) / kR;
      const int c1 = std::min(C, (p0 + 2 * kPairs + kR - 1) / kR);
      const int k0 = kb * kR, k1 = std::min(K, k0 + kR);
      if (flip)
        for (int c = c0; c < c1; ++c)
          PrefetchL1Span(w + (int64_t(c) * K + k0) * 9, int64_t(k1 - k0) * 9);
      else
        for (int k = k0; k < k1; ++k)
          PrefetchL1Span(w + (int64_t(k) * C + c0) * 9, int64_t(c1 - c0) * 9);
    }
    for (int v = 0; v < padded; v += kVW) {
      const int e0 = p0 + v, lanes = std::min(kVW, np - v);
      const float* taps[kVW];
      for (int l = 0, c = e0 / kR, r = e0 % kR; l < kVW; ++l) {
        const int k = kb * kR + r;
        taps[l] = l >= lanes || k >= K ? kNoTaps
                  : flip               ? w + (int64_t(c) * K + k) * 9
                                       : w + (int64_t(k) * C + c) * 9;
        if (++r == kR) r = 0, ++c;
      }
      Vec x[9], t[3 * A];
      TapVectors(taps, flip, x);
      for (int jj = 0; jj < 3; ++jj) Tl::Weight(x + jj, 3, t + jj, 3);
      // Row by row, each stored as it is made: the whole of U's A * A
      // vectors would not fit in the registers.
      for (int i = 0; i < A; ++i) {
        Vec u[A];
        Tl::Weight(t + 3 * i, 1, u, 1);
        float* d = dst + A * i * slice + e0;
        for (int jj = 0; jj < A; ++jj) StoreFirst(d + jj * slice, u[jj], lanes);
      }
    }
  }
}

struct Sizes {
  int KB, Kp, P;
  int64_t vslice;  // floats per slice of V
  int64_t mfloats;
};

template <int T>
Sizes SizesFor(const WinoJob& j, int64_t tiles) {
  constexpr int AA = Tiling<T>::kA * Tiling<T>::kA;
  Sizes s;
  s.KB = (j.K + kR - 1) / kR;
  s.Kp = s.KB * kR;
  s.P = int((tiles + kPW - 1) / kPW);
  s.vslice = int64_t(s.P) * j.C * kPW + kSlicePad;
  s.mfloats = int64_t(s.P) * s.Kp * AA * kPW;
  return s;
}

// Channels summed in registers before the partial sum joins M: summing in
// chunks keeps the rounding error of deep layers (512 channels, whose
// transformed terms are larger than the outputs) within what the direct
// convolution's tests allow.
constexpr int kChunk = 64;

// Channels ahead at which Product and ProductNarrow fetch U, where its row
// blocks come from memory (a network's weights passing through the cache,
// each block read once at batch 1). The fetches that pass the last channel
// go on into the next call's U (`next`, null for none): without them the
// first channels of a block were fetched by nothing, and with ProductNarrow's
// three blocks read side by side, those of all three. ResNet-18's batch-1
// forward took 0.94x the time at two threads and 0.90x at one with
// AVX-512, its 128@16 and 256@8 layers with U from memory 0.75-0.92x; with
// the AVX2 kernels, whose product is Product, 0.94-0.95x, 256@8 0.72-0.78x
// and 128@16 0.87-0.93x (Zen 5, alternating call by call). 96 and 128
// channels took 0.98-0.99x the time of 64, the distance of the fetches
// before they went on into the next call (64 had measured 0.96-0.99x
// against 32, 128 and 256 then).
constexpr int kAhead = 96;

// 6 x 2-vector register tile: m[r] = sum_c u[c][r] * v[c] over C channels,
// fetching U ahead when `next` is given (a block read once).
__attribute__((noinline)) void Product(const float* u, const float* v, int C,
                                       float* m, int64_t mstride, const float* next) {
  for (int c0 = 0; c0 < C; c0 += kChunk) {
    const int c1 = std::min(C, c0 + kChunk);
    Vec acc[kR][kNV];
    for (int r = 0; r < kR; ++r)
      for (int q = 0; q < kNV; ++q) acc[r][q] = Vec{};
    for (int c = c0; c < c1; ++c) {
      const float* uc = u + c * kR;
      if (next && c % 2 == 0) {
        const int ca = c + kAhead;
        __builtin_prefetch(ca < C ? u + ca * kR : next + (ca - C) * kR, 0, 3);
      }
      Vec b[kNV];
      for (int q = 0; q < kNV; ++q) b[q] = Load(v + c * kPW + q * kVW);
      for (int r = 0; r < kR; ++r) {
        const Vec a = Splat(uc[r]);
        for (int q = 0; q < kNV; ++q) acc[r][q] += a * b[q];
      }
    }
    for (int r = 0; r < kR; ++r)
      for (int q = 0; q < kNV; ++q) {
        float* dst = m + r * mstride + q * kVW;
        Store(dst, c0 == 0 ? acc[r][q] : Load(dst) + acc[r][q]);
      }
  }
}

// Product for a panel whose tiles fit one vector, over B row blocks of U
// at once (kR rows each, `ustride` floats apart, their rows of M
// consecutive): B * kR rows x one vector. Only the first vector of each
// row of M is written. U is fetched ahead (see kAhead), past the last
// channel into the B blocks of `next` (C * kR floats apart).
template <int B>
__attribute__((noinline)) void ProductNarrow(const float* u, int64_t ustride,
                                             const float* v, int C, float* m,
                                             int64_t mstride, const float* next) {
  for (int c0 = 0; c0 < C; c0 += kChunk) {
    const int c1 = std::min(C, c0 + kChunk);
    Vec acc[B * kR];
    for (int r = 0; r < B * kR; ++r) acc[r] = Vec{};
    for (int c = c0; c < c1; ++c) {
      const Vec b = Load(v + c * kPW);
      if (c % 2 == 0) {
        const int ca = c + kAhead;
        if (ca < C) {
          for (int blk = 0; blk < B; ++blk)
            __builtin_prefetch(u + blk * ustride + ca * kR, 0, 3);
        } else if (next) {
          for (int blk = 0; blk < B; ++blk)
            __builtin_prefetch(next + blk * int64_t(C) * kR + (ca - C) * kR, 0, 3);
        }
      }
      for (int blk = 0; blk < B; ++blk) {
        const float* uc = u + blk * ustride + c * kR;
        for (int r = 0; r < kR; ++r) acc[blk * kR + r] += Splat(uc[r]) * b;
      }
    }
    for (int r = 0; r < B * kR; ++r) {
      float* dst = m + r * mstride;
      Store(dst, c0 == 0 ? acc[r] : Load(dst) + acc[r]);
    }
  }
}

// y = A^T [U V] A for tiles [t0, t1) and row blocks [kb0, kb1) of U, in
// one tiling (see WinoBlock).
template <int T>
void Block(const WinoJob& j, int64_t t0, int64_t t1, int kb0, int kb1,
           float* work) {
  using Tl = Tiling<T>;
  constexpr int A = Tl::kA, AA = A * A;
  const Sizes s = SizesFor<T>(j, t1 - t0);
  const int C = j.C, K = j.K, th = j.th(), tw = j.tw();
  float* V = work;
  float* M = V + AA * s.vslice;
  float* ublock = M + s.mfloats;
  TileOrigin* org = reinterpret_cast<TileOrigin*>(
      ublock + (j.U ? 0 : AA * (int64_t(C) * kR + kSlicePad)));
  const int64_t plane = int64_t(j.sh) * j.sw, oplane = int64_t(j.oh) * j.ow;
  for (int64_t t = t0; t < t1; ++t) {
    const int64_t b = t / (int64_t(th) * tw);
    const int ty = int(t / tw % th), tx = int(t % tw);
    TileOrigin& o = org[t - t0];
    o.img = b * C * plane;
    o.y0 = T * ty - j.pad_t;
    o.x0 = T * tx - j.pad_l;
    o.out = b * K * oplane + int64_t(T * ty) * j.ow + T * tx;
    o.rows = std::min(T, j.oh - T * ty);
    o.cols = std::min(T, j.ow - T * tx);
  }

  // One panel whose tiles fit one vector (a 16x16 plane in 4x4 tiles, or
  // an 8x8 one in 2x2 tiles, at batch 1 with AVX-512): only the first
  // vector of V and M is computed, and the product takes three row blocks
  // of a shared U at once. ResNet-18's 128@16 layer at batch 1 took
  // 0.72x the time at one thread, its batch-1 forward 0.96x at one thread
  // and 0.92x at two (Zen 5, alternating call by call).
  const bool narrow = j.U && s.P == 1 && t1 - t0 <= kVW && kNV > 1;
  const int nv = narrow ? 1 : kNV;

  // V = B^T d B for every channel and tile.
  alignas(64) float d[AA][kPW];
  FastWindows<A> windows;
  for (int p = 0; p < s.P; ++p) {
    const int lanes = int(std::min<int64_t>(kPW, t1 - t0 - int64_t(p) * kPW));
    const bool fast = windows.Build(j, org + p * kPW, lanes, nv);
    for (int c = 0; c < C; ++c) {
      if (fast)
        windows.Windows(j, c, d);
      else
        Gather<A>(j, org + p * kPW, lanes, c, d);
      float* v = V + (int64_t(p) * C + c) * kPW;
      for (int q = 0; q < nv; ++q) {
        // d, V and M are 64-byte aligned with rows of whole vectors, so
        // the transforms read and write them in place as vectors.
        const Vec* dv = reinterpret_cast<const Vec*>(&d[0][0]) + q;
        Vec* vv = reinterpret_cast<Vec*>(v) + q;
        const int vs = int(s.vslice / kVW);
        Vec y[AA];
        for (int jj = 0; jj < A; ++jj) Tl::Input(dv + jj * kNV, A * kNV, y + jj, A);
        for (int i = 0; i < A; ++i) Tl::Input(y + A * i, 1, vv + A * i * vs, vs);
      }
    }
  }

  // M[xi] = U[xi] V[xi]: slice by slice from a precomputed U, so one slice
  // of V serves every row block; without one, by row blocks of U, each
  // transformed here into a buffer that stays in cache.
  auto product = [&](int xi, int kb, const float* u, const float* next) {
    for (int p = 0; p < s.P; ++p)
      Product(u, V + xi * s.vslice + int64_t(p) * C * kPW, C,
              M + ((int64_t(kb) * kR * s.P + p) * AA + xi) * kPW,
              int64_t(s.P) * AA * kPW, next);
  };
  const int64_t uslice = USlice(K, C);
  auto u_at = [&](int xi, int kb) { return j.U + xi * uslice + int64_t(kb) * C * kR; };
  // U of the call after the one at (xi, kb), which is `n` row blocks wide.
  auto next = [&](int xi, int kb, int n) -> const float* {
    if (kb + n < kb1) return u_at(xi, kb + n);
    return xi + 1 < AA ? u_at(xi + 1, kb0) : nullptr;
  };
  if (narrow) {
    constexpr int kBlocks = 3;
    const int64_t mstride = int64_t(AA) * kPW;
    for (int xi = 0; xi < AA; ++xi) {
      int kb = kb0;
      const float* v = V + xi * s.vslice;
      for (; kb + kBlocks <= kb1; kb += kBlocks)
        ProductNarrow<kBlocks>(u_at(xi, kb), int64_t(C) * kR, v, C,
                               M + (int64_t(kb) * kR * AA + xi) * kPW, mstride,
                               next(xi, kb, kBlocks));
      for (; kb < kb1; ++kb)
        ProductNarrow<1>(u_at(xi, kb), 0, v, C, M + (int64_t(kb) * kR * AA + xi) * kPW,
                         mstride, next(xi, kb, 1));
    }
  } else if (j.U) {
    // One panel reads each block once, so it fetches ahead; with more,
    // later panels find the block in cache.
    for (int xi = 0; xi < AA; ++xi)
      for (int kb = kb0; kb < kb1; ++kb)
        product(xi, kb, u_at(xi, kb), s.P == 1 ? next(xi, kb, 1) : nullptr);
  } else {
    const int64_t bslice = int64_t(C) * kR + kSlicePad;
    for (int kb = kb0; kb < kb1; ++kb) {
      RowBlockWeights<T>(j.w, K, C, j.flip, kb, ublock, bslice);
      for (int xi = 0; xi < AA; ++xi) product(xi, kb, ublock + xi * bslice, nullptr);
    }
  }

  // y = A^T M A + bias, scattered to the tiles' pixels. With 4x4 tiles,
  // one in-lane transpose turns a tile row's four output vectors into a
  // piece of four floats per tile, instead of 16 floats moved one by one
  // from `out` (ResNet-18's 64@32 forward and data gradient at batch 32
  // took 0.89-0.91x the time, its other Winograd layers 0.94-1.02x, its
  // training step 0.98-0.99x). QuadLines then puts the pieces of four
  // neighbouring tiles side by side (lines[i][q][b]: tiles q * kVW + 4 b +
  // c, c = 0..3, 16 floats), so four whole tiles next to each other in a
  // row are written as one line of 16 floats per row instead of four
  // pieces: the 64@32 forward and data gradient at batch 32 took
  // 0.95-0.96x the time, 128@16 0.97x, batch 1 0.94-0.98x, 256@8 (two
  // tiles a row, so pieces only) 0.97-1.01x (AVX-512); 0.97-1.01x with the
  // AVX2 kernels (Zen 5, alternating call by call).
  alignas(64) float out[T * T][kPW];
  alignas(64) float lines[T][kNV][kVW / 4][16];
  constexpr bool kByPieces = T == 4;
  for (int k = kb0 * kR; k < std::min(K, kb1 * kR); ++k) {
    const float bias = j.bias ? j.bias[k] : 0.f;
    for (int p = 0; p < s.P; ++p) {
      const float* m = M + (int64_t(k) * s.P + p) * AA * kPW;
      for (int q = 0; q < nv; ++q) {
        const Vec* mv = reinterpret_cast<const Vec*>(m) + q;
        Vec x[T * T], y[T * A];
        for (int jj = 0; jj < A; ++jj) Tl::Output(mv + jj * kNV, A * kNV, y + jj, A);
        for (int i = 0; i < T; ++i) Tl::Output(y + A * i, 1, x + T * i, 1);
        for (int e = 0; e < T * T; ++e) x[e] += bias;
        if constexpr (kByPieces) {
          for (int i = 0; i < T; ++i) {
            Vec col[4];
            Transpose4(x + T * i, col);
            QuadLines(col, &lines[i][q][0][0]);
          }
        } else {
          for (int e = 0; e < T * T; ++e) Store(&out[e][q * kVW], x[e]);
        }
      }
      const int lanes = int(std::min<int64_t>(kPW, t1 - t0 - int64_t(p) * kPW));
      const TileOrigin* po = org + p * kPW;
      for (int l = 0; l < lanes; ++l) {
        const TileOrigin& o = po[l];
        float* dst = j.dst + o.out + k * oplane;
        if constexpr (kByPieces) {
          const float* r = &lines[0][l / kVW][l % kVW / 4][4 * (l % 4)];
          constexpr int kRowStep = kNV * 4 * kVW;  // floats from one row to the next
          if (l % 4 == 0 && l + 4 <= lanes && o.rows == T && po[l + 3].cols == T &&
              po[l + 1].out == o.out + T && po[l + 2].out == o.out + 2 * T &&
              po[l + 3].out == o.out + 3 * T) {
            for (int i = 0; i < T; ++i, dst += j.ow, r += kRowStep)
              std::memcpy(dst, r, 16 * sizeof(float));
            l += 3;  // the other three tiles of the line are written
          } else if (o.rows == T && o.cols == T) {
            for (int i = 0; i < T; ++i, dst += j.ow, r += kRowStep)
              std::memcpy(dst, r, 4 * sizeof(float));
          } else {
            for (int i = 0; i < o.rows; ++i, dst += j.ow, r += kRowStep)
              for (int jj = 0; jj < o.cols; ++jj) dst[jj] = r[jj];
          }
        } else if (o.rows == T && o.cols == T) {
          for (int i = 0; i < T; ++i, dst += j.ow)
            for (int jj = 0; jj < T; ++jj) dst[jj] = out[i * T + jj][l];
        } else {
          for (int i = 0; i < o.rows; ++i, dst += j.ow)
            for (int jj = 0; jj < o.cols; ++jj) dst[jj] = out[i * T + jj][l];
        }
      }
    }
  }
}

}  // namespace

int WinoRows() { return kR; }
int WinoPanel() { return kPW; }
int WinoNarrowPanel() { return kVW; }

size_t WinoWeightFloats(int K, int C, int tile) {
  return size_t((tile + 2) * (tile + 2) * USlice(K, C));
}

void WinoWeights(const float* w, int K, int C, bool flip, int tile, float* U,
                 int kb0, int kb1) {
  for (int kb = kb0; kb < kb1; ++kb) {
    float* dst = U + int64_t(kb) * C * kR;
    if (tile == 2)
      RowBlockWeights<2>(w, K, C, flip, kb, dst, USlice(K, C));
    else
      RowBlockWeights<4>(w, K, C, flip, kb, dst, USlice(K, C));
  }
}

size_t WinoWorkFloats(const WinoJob& j, int64_t tiles) {
  const int AA = j.positions();
  const Sizes s = j.tile == 2 ? SizesFor<2>(j, tiles) : SizesFor<4>(j, tiles);
  const size_t origins =
      (sizeof(TileOrigin) * s.P * kPW + sizeof(float) - 1) / sizeof(float);
  const size_t ublock = j.U ? 0 : size_t(AA) * (int64_t(j.C) * kR + kSlicePad);
  return size_t(AA * s.vslice + s.mfloats) + ublock + origins + 16;
}

void WinoBlock(const WinoJob& j, int64_t t0, int64_t t1, int kb0, int kb1,
               float* work) {
  if (j.tile == 2)
    Block<2>(j, t0, t1, kb0, kb1, work);
  else
    Block<4>(j, t0, t1, kb0, kb1, work);
}

}  // namespace SINGA_ISA_NS
}  // namespace cpu
}  // namespace singa
