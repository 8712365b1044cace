// Winograd F(4x4, 3x3) and F(2x2, 3x3) kernels for one ISA family (see
// winograd.h for the algorithm and the layouts, cpu_isa.h for the
// families). Everything below is written once for an output tile of T x T
// pixels from windows of (T + 2) x (T + 2) inputs; T is 4 or 2.
//
// The transforms of the input and output tiles run on vectors whose lanes
// are tiles, so one panel of PW tiles is transformed with the same code as
// a single tile; the tiles' 6x6 windows are first gathered into a small
// lane-major buffer (zero where a window leaves the plane). The product
// over channels uses a 6-row x 2-vector register tile: six broadcast
// weights against two vectors of tiles per channel.
#include <algorithm>
#include <cstring>

#include "conv_engine.h"
#include "isa_vec.h"
#include "winograd.h"

#ifndef SINGA_ISA_NS
#error "winograd_isa.cc is compiled per ISA: define SINGA_ISA_NS and SINGA_ISA_LEVEL"
#endif

namespace singa {
namespace cpu {
namespace SINGA_ISA_NS {

namespace {

constexpr int kR = 6;           // rows of U per register tile
constexpr int kNV = 2;          // vectors per panel
constexpr int kPW = kNV * kVW;  // tiles per panel
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
      auto fetch = [](const float* a, int64_t n) {
        for (int64_t f = 0; f < n; f += 16) PrefetchL1(a + f);
        PrefetchL1(a + n - 1);
      };
      if (flip)
        for (int c = c0; c < c1; ++c)
          fetch(w + (int64_t(c) * K + k0) * 9, int64_t(k1 - k0) * 9);
      else
        for (int k = k0; k < k1; ++k)
          fetch(w + (int64_t(k) * C + c0) * 9, int64_t(c1 - c0) * 9);
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

// Lane l of the vectors: the A x A window of tile t0 + l, channel c.
struct TileOrigin {
  int64_t img;  // offset of the tile's image in src
  int y0, x0;   // window origin in the plane (may be negative)
  int64_t out;  // offset of the tile's first output pixel in dst, channel 0
  int rows, cols;  // output rows and columns of the tile inside the plane
};

template <int A>
__attribute__((noinline)) void Gather(const WinoJob& j, const TileOrigin* org,
                                      int lanes, int c, float (*d)[kPW]) {
  const int64_t plane = int64_t(j.sh) * j.sw;
  for (int l = 0; l < lanes; ++l) {
    const TileOrigin& o = org[l];
    const float* s = j.src + o.img + c * plane;
    if (o.y0 >= 0 && o.x0 >= 0 && o.y0 + A <= j.sh && o.x0 + A <= j.sw) {
      const float* row = s + int64_t(o.y0) * j.sw + o.x0;
      for (int i = 0; i < A; ++i, row += j.sw)
        for (int jj = 0; jj < A; ++jj) d[i * A + jj][l] = row[jj];
      continue;
    }
    for (int i = 0; i < A; ++i) {
      const int y = o.y0 + i;
      if (y < 0 || y >= j.sh) {
        for (int jj = 0; jj < A; ++jj) d[i * A + jj][l] = 0.f;
        continue;
      }
      const float* row = s + int64_t(y) * j.sw;
      for (int jj = 0; jj < A; ++jj) {
        const int x = o.x0 + jj;
        d[i * A + jj][l] = x >= 0 && x < j.sw ? row[x] : 0.f;
      }
    }
  }
  for (int l = lanes; l < kPW; ++l)
    for (int e = 0; e < A * A; ++e) d[e][l] = 0.f;
}

#if SINGA_ISA_LEVEL >= 2 && defined(__AVX512F__)
// The windows of a panel's tiles on planes at most four vectors wide, built
// from whole rows of the plane: in each vector of the panel, the tiles
// whose windows start on the same row of the same image form a group, and
// window column jj of the group's lanes is a permute of that row (column
// x0 + jj, zero outside the plane). Per channel and vector that is A row
// loads and A * A masked permutes per group where Gather moves A * A
// floats one by one for every tile (a quarter of ResNet-18's 64@32 layer
// at batch 1, 17% and 11% of its 128@16 and 256@8 ones, at one thread).
// The rows of the channel kAheadChannels on are fetched first: without
// that the few row loads waited on memory at batch 32 (the 32x32 layer
// then took 1.06-1.09x Gather's time; with it 0.77-0.78x). Measured on Zen
// 5, alternating call by call or forward by forward, against Gather:
//   ResNet-18, batch 1 forward   64@32 0.80x / 0.86x (1 / 2 threads),
//                                128@16 0.91x, 256@8 0.94-0.96x
//   batch 32 forward and dx      64@32 0.77-0.78x (1 thread), 0.74-0.77x
//                                (2); 128@16 0.92-0.93x, 0.86-0.89x;
//                                256@8 (8 groups a vector) 0.99-1.00x
//   its training step (batch 32) 0.94-0.95x
//   forward on wider planes, rows of three and four vectors (1 thread,
//   fastest of 40 calls, processes alternating): 40x40 at batch 32
//   0.92-0.95x, 64x64 at batch 16 0.79-0.89x, 56x56 at batch 8
//   0.87-1.07x.
template <int A>
class RowWindows {
 public:
  // Lanes [0, lanes) of the panel at org, over its first nv vectors; false
  // where they do not qualify: planes wider than kRowVecs vectors, or more
  // than kGroups window rows in a vector.
  bool Build(const WinoJob& j, const TileOrigin* org, int lanes, int nv) {
    if (j.sw > kRowVecs * kVW) return false;
    nv_ = nv;
    for (int q = 0; q < nv; ++q) {
      Part& part = parts_[q];
      part.groups = 0;
      const int l0 = q * kVW, l1 = std::min(lanes, l0 + kVW);
      for (int l = l0; l < l1; ++l) {
        const TileOrigin& o = org[l];
        int g = 0;
        while (g < part.groups && !(part.img[g] == o.img && part.y0[g] == o.y0)) ++g;
        if (g == part.groups) {
          if (g == kGroups) return false;
          part.img[g] = o.img;
          part.y0[g] = o.y0;
          part.members[g] = 0;
          ++part.groups;
        }
        part.members[g] |= 1u << (l - l0);
      }
      for (int jj = 0; jj < A; ++jj) {
        alignas(64) int32_t at[kVW] = {};
        unsigned ok = 0, upper = 0;
        for (int l = l0; l < l1; ++l) {
          const int x = org[l].x0 + jj;
          if (x < 0 || x >= j.sw) continue;
          at[l - l0] = x;
          ok |= 1u << (l - l0);
          if (x >= 2 * kVW) upper |= 1u << (l - l0);
        }
        part.col[jj] = _mm512_load_si512(at);
        part.inside[jj] = ok;
        part.upper[jj] = upper;
      }
    }
    return true;
  }

  // Vectors [0, nv) of d[i * A + jj] for channel c (lanes past the
  // panel's tiles zero).
  void Windows(const WinoJob& j, int c, float (*d)[kPW]) const {
    if (j.sw <= kVW)
      RowsOf<1>(j, c, d);
    else if (j.sw <= 2 * kVW)
      RowsOf<2>(j, c, d);
    else
      RowsOf<4>(j, c, d);
  }

 private:
  // Windows with rows of R registers: a permute picks from one (R = 1) or
  // two, and rows over two vectors pick from the first two or the last two
  // by the column's upper bit.
  template <int R>
  void RowsOf(const WinoJob& j, int c, float (*d)[kPW]) const {
    const int64_t plane = int64_t(j.sh) * j.sw;
    const float* src = j.src + c * plane;
    __mmask16 width[R];
    for (int r = 0; r < R; ++r)
      width[r] = __mmask16((1u << std::clamp(j.sw - r * kVW, 0, kVW)) - 1u);
    for (int q = 0; q < nv_; ++q) {
      const Part& part = parts_[q];
      if (c + kAheadChannels < j.C)
        for (int g = 0; g < part.groups; ++g)
          for (int i = 0; i < A; ++i) {
            const int y = part.y0[g] + i;
            if (y < 0 || y >= j.sh) continue;
            const float* row = src + kAheadChannels * plane + part.img[g] + int64_t(y) * j.sw;
            PrefetchL1(row);
            for (int r = 1; r < R - 1; ++r) PrefetchL1(row + r * kVW);
            if (R > 1) PrefetchL1(row + j.sw - 1);
          }
      for (int i = 0; i < A; ++i) {
        __m512 rv[R][kGroups];
        for (int g = 0; g < part.groups; ++g) {
          const int y = part.y0[g] + i;
          for (int r = 0; r < R; ++r) rv[r][g] = _mm512_setzero_ps();
          if (y < 0 || y >= j.sh) continue;
          const float* row = src + part.img[g] + int64_t(y) * j.sw;
          for (int r = 0; r < R; ++r)
            rv[r][g] = _mm512_maskz_loadu_ps(width[r], row + r * kVW);
        }
        for (int jj = 0; jj < A; ++jj) {
          __m512 v = _mm512_setzero_ps();
          for (int g = 0; g < part.groups; ++g) {
            const unsigned k = part.members[g] & part.inside[jj];
            if constexpr (R == 1) {
              v = _mm512_mask_permutexvar_ps(v, __mmask16(k), part.col[jj], rv[0][g]);
            } else if constexpr (R == 2) {
              v = _mm512_mask_mov_ps(
                  v, __mmask16(k), _mm512_permutex2var_ps(rv[0][g], part.col[jj], rv[1][g]));
            } else {
              v = _mm512_mask_mov_ps(
                  v, __mmask16(k & ~part.upper[jj]),
                  _mm512_permutex2var_ps(rv[0][g], part.col[jj], rv[1][g]));
              v = _mm512_mask_mov_ps(
                  v, __mmask16(k & part.upper[jj]),
                  _mm512_permutex2var_ps(rv[2][g], part.col[jj], rv[3][g]));
            }
          }
          _mm512_store_ps(&d[i * A + jj][q * kVW], v);
        }
      }
    }
  }

  static constexpr int kGroups = 8;
  static constexpr int kRowVecs = 4;  // planes up to 64 floats wide
  static constexpr int kAheadChannels = 2;
  // The lanes of one vector of the panel: groups[g] of them start their
  // windows on row y0[g] of the image at img[g]; col[jj] and inside[jj]
  // give each lane's column jj and whether it lies in the plane.
  struct Part {
    int groups;
    int64_t img[kGroups];
    int y0[kGroups];
    unsigned members[kGroups];
    __m512i col[A];
    unsigned inside[A], upper[A];
  };
  int nv_ = 0;
  Part parts_[kNV];
};
template <int A>
using FastWindows = RowWindows<A>;
#elif SINGA_ISA_LEVEL == 1 && defined(__AVX2__)
// The windows of a panel's tiles with AVX2, lane by lane: each window row
// is read as four-float pieces (columns 0-3, and 2-5 when A is 6) by
// masked loads, which read nothing outside the plane and give zeros there,
// and the pieces of lanes k and k + 4 (k < 4) share a register, so one
// in-lane 4x4 transpose turns four registers into four window columns of a
// vector. Tiles may lie anywhere: unlike RowWindows no grouping by row is
// needed, and AVX2's one-register permutes would make that no cheaper
// than Gather. Where the input is over kFetchAheadBytes, the rows of the
// channel kAheadChannels on are fetched first (at batch 32 the 64@32 and
// 128@16 layers then took 0.89-0.95x the time; at batch 1, whose input
// stays in cache, the fetches cost 1-4%). Measured on Zen 5 with the AVX2
// kernels, alternating call by call against Gather:
//   ResNet-18, batch 32 forward and dx   64@32 0.79-0.83x (1 and 2
//                                        threads), 128@16 0.92-0.94x,
//                                        256@8 0.97-1.00x
//   batch 1 forward and dx               0.83-0.96x
//   its training step (batch 32)         0.97x at 1 and 2 threads
template <int A>
class LaneWindows {
 public:
  bool Build(const WinoJob& j, const TileOrigin* org, int lanes, int nv) {
    nv_ = nv;
    fetch_ = int64_t(sizeof(float)) * j.n * j.C * j.sh * j.sw > kFetchAheadBytes;
    runs_ = 0;
    for (int l = 0; l < std::min(lanes, nv * kVW); ++l) {
      const TileOrigin& o = org[l];
      if (runs_ == 0 || run_[runs_ - 1].img != o.img || run_[runs_ - 1].y0 != o.y0)
        run_[runs_++] = Run{o.img, o.y0, o.x0, o.x0};
      run_[runs_ - 1].x1 = o.x0;
    }
    const __m128i quad = _mm_setr_epi32(0, 1, 2, 3);
    const __m128i before = _mm_set1_epi32(-1), width = _mm_set1_epi32(j.sw);
    for (int l = 0; l < nv * kVW; ++l) {
      off_[l] = 0;
      for (int i = 0; i < A; ++i)
        for (int p = 0; p < kPieces; ++p) mask_[l][i][p] = _mm_setzero_si128();
      if (l >= lanes) continue;
      const TileOrigin& o = org[l];
      off_[l] = o.img + int64_t(o.y0) * j.sw + o.x0;
      for (int p = 0; p < kPieces; ++p) {
        const __m128i x = _mm_add_epi32(_mm_set1_epi32(o.x0 + 2 * p), quad);
        const __m128i in =
            _mm_and_si128(_mm_cmpgt_epi32(x, before), _mm_cmpgt_epi32(width, x));
        for (int i = 0; i < A; ++i)
          if (o.y0 + i >= 0 && o.y0 + i < j.sh) mask_[l][i][p] = in;
      }
    }
    return true;
  }

  // Vectors [0, nv) of d[i * A + jj] for channel c (lanes past the
  // panel's tiles zero).
  void Windows(const WinoJob& j, int c, float (*d)[kPW]) const {
    const int64_t plane = int64_t(j.sh) * j.sw;
    const float* src = j.src + c * plane;
    if (fetch_ && c + kAheadChannels < j.C)
      for (int r = 0; r < runs_; ++r) {
        const Run& run = run_[r];
        const int x0 = std::max(run.x0, 0), x1 = std::min(run.x1 + A, j.sw);
        for (int i = 0; i < A; ++i) {
          const int y = run.y0 + i;
          if (y < 0 || y >= j.sh) continue;
          const float* row = src + kAheadChannels * plane + run.img + int64_t(y) * j.sw;
          for (int x = x0; x < x1; x += 16) PrefetchL1(row + x);
          PrefetchL1(row + x1 - 1);
        }
      }
    for (int q = 0; q < nv_; ++q)
      for (int i = 0; i < A; ++i) {
        const int64_t row = int64_t(i) * j.sw;
        for (int p = 0; p < kPieces; ++p) {
          __m256 v[4];
          for (int k = 0; k < 4; ++k) {
            const int lo = q * kVW + k, hi = lo + 4;
            v[k] = _mm256_insertf128_ps(
                _mm256_castps128_ps256(
                    _mm_maskload_ps(src + off_[lo] + row + 2 * p, mask_[lo][i][p])),
                _mm_maskload_ps(src + off_[hi] + row + 2 * p, mask_[hi][i][p]), 1);
          }
          // t0 and t2: elements 0 and 1 of lanes 0, 1 and of lanes 2, 3
          // (4, 5 and 6, 7 above); t1 and t3: their elements 2 and 3.
          const __m256 t0 = _mm256_unpacklo_ps(v[0], v[1]), t1 = _mm256_unpackhi_ps(v[0], v[1]);
          const __m256 t2 = _mm256_unpacklo_ps(v[2], v[3]), t3 = _mm256_unpackhi_ps(v[2], v[3]);
          float* col = &d[i * A + 2 * p][q * kVW];
          if (p == 0) {
            _mm256_store_ps(col, _mm256_shuffle_ps(t0, t2, 0x44));
            _mm256_store_ps(col + kPW, _mm256_shuffle_ps(t0, t2, 0xEE));
          }
          _mm256_store_ps(col + 2 * kPW, _mm256_shuffle_ps(t1, t3, 0x44));
          _mm256_store_ps(col + 3 * kPW, _mm256_shuffle_ps(t1, t3, 0xEE));
        }
      }
  }

 private:
  static constexpr int kPieces = A == 6 ? 2 : 1;
  static constexpr int kAheadChannels = 2;
  // Consecutive lanes whose windows start on the same row: the rows they
  // read, fetched ahead.
  struct Run {
    int64_t img;
    int y0, x0, x1;  // x1: the last lane's x0
  };
  bool fetch_ = false;  // the input is too large to stay in L2
  int runs_ = 0;
  Run run_[kPW];
  int nv_ = 0;
  int64_t off_[kPW];               // each lane's window origin in a plane
  __m128i mask_[kPW][A][kPieces];  // the piece's columns inside the plane
};
template <int A>
using FastWindows = LaneWindows<A>;
#else
// Without AVX2 the windows are gathered tile by tile.
template <int A>
class NoWindows {
 public:
  bool Build(const WinoJob&, const TileOrigin*, int, int) { return false; }
  void Windows(const WinoJob&, int, float (*)[kPW]) const {}
};
template <int A>
using FastWindows = NoWindows<A>;
#endif

// Channels summed in registers before the partial sum joins M: summing in
// chunks keeps the rounding error of deep layers (512 channels, whose
// transformed terms are larger than the outputs) within what the direct
// convolution's tests allow.
constexpr int kChunk = 64;

// 6 x 2-vector register tile: m[r] = sum_c u[c][r] * v[c] over C channels.
__attribute__((noinline)) void Product(const float* u, const float* v, int C,
                                       float* m, int64_t mstride) {
  for (int c0 = 0; c0 < C; c0 += kChunk) {
    const int c1 = std::min(C, c0 + kChunk);
    Vec acc[kR][kNV];
    for (int r = 0; r < kR; ++r)
      for (int q = 0; q < kNV; ++q) acc[r][q] = Vec{};
    for (int c = c0; c < c1; ++c) {
      const float* uc = u + c * kR;
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

// Channels ahead at which ProductNarrow fetches U: its row blocks come
// from memory when a network's weights pass through the cache (ResNet-18's
// batch-1 forward took 0.94-0.97x the time at two threads with 64 channels
// ahead; 32, 128 and 256 took 1.01-1.04x against 64; AVX-512 Zen 5,
// alternating call by call).
constexpr int kAhead = 64;

// Product for a panel whose tiles fit one vector, over B row blocks of U
// at once (kR rows each, `ustride` floats apart, their rows of M
// consecutive): B * kR rows x one vector. Only the first vector of each
// row of M is written.
template <int B>
__attribute__((noinline)) void ProductNarrow(const float* u, int64_t ustride,
                                             const float* v, int C, float* m,
                                             int64_t mstride) {
  for (int c0 = 0; c0 < C; c0 += kChunk) {
    const int c1 = std::min(C, c0 + kChunk);
    Vec acc[B * kR];
    for (int r = 0; r < B * kR; ++r) acc[r] = Vec{};
    for (int c = c0; c < c1; ++c) {
      const Vec b = Load(v + c * kPW);
      if (c % 2 == 0)
        for (int blk = 0; blk < B; ++blk)
          __builtin_prefetch(u + blk * ustride + (c + kAhead) * kR, 0, 3);
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
  auto product = [&](int xi, int kb, const float* u) {
    for (int p = 0; p < s.P; ++p)
      Product(u, V + xi * s.vslice + int64_t(p) * C * kPW, C,
              M + ((int64_t(kb) * kR * s.P + p) * AA + xi) * kPW,
              int64_t(s.P) * AA * kPW);
  };
  if (narrow) {
    constexpr int kBlocks = 3;
    const int64_t uslice = USlice(K, C), mstride = int64_t(AA) * kPW;
    for (int xi = 0; xi < AA; ++xi) {
      int kb = kb0;
      const float* v = V + xi * s.vslice;
      for (; kb + kBlocks <= kb1; kb += kBlocks)
        ProductNarrow<kBlocks>(j.U + xi * uslice + int64_t(kb) * C * kR,
                               int64_t(C) * kR, v, C,
                               M + (int64_t(kb) * kR * AA + xi) * kPW, mstride);
      for (; kb < kb1; ++kb)
        ProductNarrow<1>(j.U + xi * uslice + int64_t(kb) * C * kR, 0, v, C,
                         M + (int64_t(kb) * kR * AA + xi) * kPW, mstride);
    }
  } else if (j.U) {
    const int64_t uslice = USlice(K, C);
    for (int xi = 0; xi < AA; ++xi)
      for (int kb = kb0; kb < kb1; ++kb)
        product(xi, kb, j.U + xi * uslice + int64_t(kb) * C * kR);
  } else {
    const int64_t uslice = int64_t(C) * kR + kSlicePad;
    for (int kb = kb0; kb < kb1; ++kb) {
      RowBlockWeights<T>(j.w, K, C, j.flip, kb, ublock, uslice);
      for (int xi = 0; xi < AA; ++xi) product(xi, kb, ublock + xi * uslice);
    }
  }

  // y = A^T M A + bias, scattered to the tiles' pixels.
  alignas(64) float out[T * T][kPW];
  for (int k = kb0 * kR; k < std::min(K, kb1 * kR); ++k) {
    const float bias = j.bias ? j.bias[k] : 0.f;
    for (int p = 0; p < s.P; ++p) {
      const float* m = M + (int64_t(k) * s.P + p) * AA * kPW;
      for (int q = 0; q < nv; ++q) {
        const Vec* mv = reinterpret_cast<const Vec*>(m) + q;
        Vec x[T * T], y[T * A];
        for (int jj = 0; jj < A; ++jj) Tl::Output(mv + jj * kNV, A * kNV, y + jj, A);
        for (int i = 0; i < T; ++i) Tl::Output(y + A * i, 1, x + T * i, 1);
        for (int e = 0; e < T * T; ++e) Store(&out[e][q * kVW], x[e] + bias);
      }
      const int lanes = int(std::min<int64_t>(kPW, t1 - t0 - int64_t(p) * kPW));
      for (int l = 0; l < lanes; ++l) {
        const TileOrigin& o = org[p * kPW + l];
        float* dst = j.dst + o.out + k * oplane;
        if (o.rows == T && o.cols == T) {
          for (int i = 0; i < T; ++i, dst += j.ow)
            for (int jj = 0; jj < T; ++jj) dst[jj] = out[i * T + jj][l];
          continue;
        }
        for (int i = 0; i < o.rows; ++i, dst += j.ow)
          for (int jj = 0; jj < o.cols; ++jj) dst[jj] = out[i * T + jj][l];
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
