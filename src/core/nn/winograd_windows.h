// The windows of a panel of Winograd tiles for one ISA family: for each
// input channel, the (T + 2) x (T + 2) inputs of each tile, lane-major
// (lane l of d[e] holds input e of tile l's window, zero outside the
// plane), which winograd_isa.cc's input transform reads as vectors.
// Gather moves them float by float (the baseline family); FastWindows
// builds them with vectors: with AVX-512 RowWindows from whole rows of the
// plane where a panel qualifies, else LaneWindows from four-float pieces,
// which AVX2 uses for every panel. Included by winograd_isa.cc only.
#ifndef SINGA_SRC_CORE_NN_WINOGRAD_WINDOWS_H_
#define SINGA_SRC_CORE_NN_WINOGRAD_WINDOWS_H_

#include <algorithm>
#include <cstdint>

#include "conv_engine.h"
#include "isa_vec.h"
#include "winograd.h"

#ifndef SINGA_ISA_NS
#error "winograd_windows.h is compiled per ISA: define SINGA_ISA_NS and SINGA_ISA_LEVEL"
#endif

namespace singa {
namespace cpu {
namespace SINGA_ISA_NS {
namespace {

constexpr int kNV = 2;          // vectors per panel
constexpr int kPW = kNV * kVW;  // tiles per panel

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
#endif

#if SINGA_ISA_LEVEL >= 1 && defined(__AVX2__)
// The windows of a panel's tiles lane by lane, with AVX2 and for the
// panels RowWindows does not take with AVX-512: each window row is read as
// four-float pieces (columns 0-3, and 2-5 when A is 6) by masked loads,
// which read nothing outside the plane and give zeros there, and the
// pieces of lanes k, k + 4, ... (k < 4) share a register, so one in-lane
// 4x4 transpose turns four registers into four window columns of a vector.
// Tiles may lie anywhere: no grouping by row is needed, which AVX2's
// one-register permutes would make no cheaper than Gather. Where the input
// is over kFetchAheadBytes, the rows of the channel kAheadChannels on are
// fetched first (at batch 32 the 64@32 and 128@16 layers then took
// 0.89-0.95x the time; at batch 1, whose input stays in cache, the fetches
// cost 1-4%). Measured on Zen 5, alternating call by call against Gather:
//   AVX2 kernels, ResNet-18      batch 32 forward and dx: 64@32 0.79-0.89x
//                                (1 and 2 threads), 128@16 0.92-0.94x,
//                                256@8 0.97-1.00x; batch 1 0.83-0.96x;
//                                its training step 0.97x
//   AVX-512 kernels              512@4 at batch 32 and 64 (16 window rows
//                                a vector) 0.98-1.0x; 112x112 planes at
//                                batch 8, 64 channels, 0.87-0.90x
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
    const PieceMask none = PieceMaskOf(0);
    for (int l = 0; l < nv * kVW; ++l) {
      off_[l] = 0;
      for (int i = 0; i < A; ++i)
        for (int p = 0; p < kPieces; ++p) mask_[l][i][p] = none;
      if (l >= lanes) continue;
      const TileOrigin& o = org[l];
      off_[l] = o.img + int64_t(o.y0) * j.sw + o.x0;
      for (int p = 0; p < kPieces; ++p) {
        unsigned bits = 0;
        for (int e = 0; e < 4; ++e) {
          const int x = o.x0 + 2 * p + e;
          if (x >= 0 && x < j.sw) bits |= 1u << e;
        }
        const PieceMask in = PieceMaskOf(bits);
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
          PrefetchL1Span(row + x0, x1 - x0);
        }
      }
    for (int q = 0; q < nv_; ++q)
      for (int i = 0; i < A; ++i) {
        const int64_t row = int64_t(i) * j.sw;
        for (int p = 0; p < kPieces; ++p) {
          Vec v[4], col[4];
          for (int k = 0; k < 4; ++k) {
            __m128 piece[kVW / 4];
            for (int b = 0; b < kVW / 4; ++b) {
              const int l = q * kVW + 4 * b + k;
              piece[b] = LoadPiece(src + off_[l] + row + 2 * p, mask_[l][i][p]);
            }
            v[k] = JoinQuads(piece);
          }
          Transpose4(v, col);
          float* out = &d[i * A + 2 * p][q * kVW];
          for (int e = 2 * p; e < 4; ++e) Store(out + e * kPW, col[e]);
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
  PieceMask mask_[kPW][A][kPieces];  // the piece's columns inside the plane
};
#if SINGA_ISA_LEVEL >= 2 && defined(__AVX512F__)
// With AVX-512: from rows where the panel qualifies, else lane by lane.
template <int A>
class RowsOrLanes {
 public:
  bool Build(const WinoJob& j, const TileOrigin* org, int lanes, int nv) {
    by_rows_ = rows_.Build(j, org, lanes, nv);
    return by_rows_ || lanes_.Build(j, org, lanes, nv);
  }
  void Windows(const WinoJob& j, int c, float (*d)[kPW]) const {
    if (by_rows_)
      rows_.Windows(j, c, d);
    else
      lanes_.Windows(j, c, d);
  }

 private:
  RowWindows<A> rows_;
  LaneWindows<A> lanes_;
  bool by_rows_ = false;
};
template <int A>
using FastWindows = RowsOrLanes<A>;
#else
template <int A>
using FastWindows = LaneWindows<A>;
#endif
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

}  // namespace
}  // namespace SINGA_ISA_NS
}  // namespace cpu
}  // namespace singa

#endif  // SINGA_SRC_CORE_NN_WINOGRAD_WINDOWS_H_
