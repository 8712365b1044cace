// The flat-shift forward and weight gradient (conv_shift.h) for one ISA
// family.
//
// Forward register tile: MR output channels x kShiftVecs vectors of wide
// columns, the register budget of conv_isa.cc's KernelNN, and MR chosen by
// its rule (NnRowsPerTile, whose row counts ShiftKernelFor instantiates). The B vectors of tap k are loaded straight from the padded
// plane at xp + off[k] + column; the weights are broadcast from w. A tile is
// done with one pass over the whole reduction, so it starts from the bias
// and is stored once. The weight gradient's tiles are described with DwTile.
#include <algorithm>
#include <cstdint>
#include <cstring>

#if defined(__AVX2__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "conv_shift.h"
#include "isa_vec.h"

#ifndef SINGA_ISA_NS
#error "conv_shift_isa.cc is compiled per ISA: define SINGA_ISA_NS and SINGA_ISA_LEVEL"
#endif

namespace singa {
namespace cpu {
namespace SINGA_ISA_NS {

namespace {

constexpr int kShiftVecs = 2;
constexpr int kShiftCols = kShiftVecs * kVW;

inline Vec Splat(float x) { return Vec{} + x; }

// dst[0:n] = src[0:n] for the short rows copied per image: a library call
// per row took a seventh of LeNet conv1's weight gradient. The empty asm
// keeps GCC from turning the loops back into such a call.
inline void CopyRow(float* __restrict dst, const float* __restrict src, int n) {
  int i = 0;
  for (; i + kVW <= n; i += kVW) {
    Store(dst + i, Load(src + i));
    __asm__ volatile("" ::: "memory");
  }
  for (; i < n; ++i) {
    dst[i] = src[i];
    __asm__ volatile("" ::: "memory");
  }
}

// Image b of x into the interior of the zero-bordered plane at xp.
template <typename Job>
void PadImage(const Job& j, int b, float* xp) {
  const int64_t plane = int64_t(j.h) * j.w;
  const float* x = j.x + int64_t(b) * j.c * plane;
  for (int cc = 0; cc < j.c; ++cc)
    for (int r = 0; r < j.h; ++r)
      CopyRow(xp + (int64_t(cc) * j.hp + j.pad_t + r) * j.wp + j.pad_l,
              x + cc * plane + int64_t(r) * j.w, j.w);
}

// How one vector of wide columns is stored in an output plane of P floats.
// Its n valid lanes are moved to the front (lane t takes wide lane idx[t])
// and the vector is stored whole at plane + at, so its last kVW - n lanes
// land on outputs that a later vector (in column order) overwrites; only
// where that would run past the plane are lanes [0, n) stored masked.
// Moving lanes costs one permute, where storing each piece with its own
// masked store cost a quarter of the layer's time on Zen 4.
struct VecPlan {
  IVec idx;
  int64_t at;
  enum Kind { kStore, kSkip, kMasked } kind;
  int n;
};

// The plan of wide columns [c0, c0 + kVW), of which those below q_end
// exist.
void PlanVec(int64_t c0, int64_t q_end, int wp, int ow, int64_t P,
             VecPlan* pl) {
  int n = 0;
  pl->at = 0;
  for (int l = 0; l < kVW; ++l) {
    const int64_t c = c0 + l;
    const int64_t oy = c / wp, ox = c - oy * wp;
    if (c >= q_end || ox >= ow) continue;
    if (n == 0) pl->at = oy * ow + ox;
    pl->idx[n++] = l;
  }
  for (int t = n; t < kVW; ++t) pl->idx[t] = t;
  pl->n = n;
  pl->kind = n == 0                ? VecPlan::kSkip
             : pl->at + kVW <= P   ? VecPlan::kStore
                                   : VecPlan::kMasked;
}

// The stores of a tile with fewer than MR rows or a vector that is not
// stored whole: acc[i * kShiftVecs + v] for rows i < mr.
__attribute__((noinline)) void StoreTileSlow(const Vec* acc, int mr, float* y,
                                             int64_t P, const VecPlan* plan) {
  for (int v = 0; v < kShiftVecs; ++v) {
    const VecPlan& pl = plan[v];
    for (int i = 0; i < mr; ++i) {
      const Vec moved = __builtin_shuffle(acc[i * kShiftVecs + v], pl.idx);
      if (pl.kind == VecPlan::kStore)
        Store(y + i * P + pl.at, moved);
      else if (pl.kind == VecPlan::kMasked)
        StoreFirst(y + i * P + pl.at, moved, pl.n);
    }
  }
}

// Output rows [0, mr) of one tile: y[i * P + ...] = bias[i] +
// sum_k a[i * K + k] * xq[off[k] + column]. Rows mr..MR-1 repeat row mr-1
// (valid memory) and are dropped.
template <int MR>
void ShiftTile(int K, const float* __restrict a, int mr,
               const float* __restrict xq, const int* __restrict off,
               const float* bias, float* __restrict y, int64_t P,
               const VecPlan* plan) {
  const float* ar[MR];
  for (int i = 0; i < MR; ++i) ar[i] = a + (i < mr ? i : mr - 1) * K;
  Vec s[MR][kShiftVecs];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i) {
    const Vec init = Splat(bias ? bias[i < mr ? i : mr - 1] : 0.f);
#pragma GCC unroll 4
    for (int v = 0; v < kShiftVecs; ++v) s[i][v] = init;
  }
  for (int k = 0; k < K; ++k) {
    const float* bp = xq + off[k];
    Vec bv[kShiftVecs];
#pragma GCC unroll 4
    for (int v = 0; v < kShiftVecs; ++v) bv[v] = Load(bp + v * kVW);
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      const Vec av = Splat(ar[i][k]);
#pragma GCC unroll 4
      for (int v = 0; v < kShiftVecs; ++v) s[i][v] += av * bv[v];
    }
  }
  bool plain = mr == MR;
  for (int v = 0; v < kShiftVecs; ++v) plain &= plan[v].kind == VecPlan::kStore;
  if (plain) {
#pragma GCC unroll 4
    for (int v = 0; v < kShiftVecs; ++v) {
      const IVec idx = plan[v].idx;
      float* yv = y + plan[v].at;
#pragma GCC unroll 16
      for (int i = 0; i < MR; ++i) Store(yv + i * P, __builtin_shuffle(s[i][v], idx));
    }
  } else {
    // A copy, so that the accumulators of the common case stay in registers.
    Vec acc[MR * kShiftVecs];
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
      for (int v = 0; v < kShiftVecs; ++v) acc[i * kShiftVecs + v] = s[i][v];
    StoreTileSlow(acc, mr, y, P, plan);
  }
}

}  // namespace

// conv_isa.cc's row rule for KernelNN's tiles, in this family's copy.
int NnRowsPerTile(int M);

namespace {

using ShiftKernel = void (*)(int, const float*, int, const float*, const int*,
                             const float*, float*, int64_t, const VecPlan*);

ShiftKernel ShiftKernelFor(int mr) {
  switch (mr) {
#if SINGA_ISA_LEVEL >= 2
    case 12: return ShiftTile<12>;
    case 10: return ShiftTile<10>;
    default: return ShiftTile<8>;
#else
    case 6: return ShiftTile<6>;
    case 5: return ShiftTile<5>;
    default: return ShiftTile<4>;
#endif
  }
}

int64_t Wide(const ShiftJob& j) { return int64_t(j.oh - 1) * j.wp + j.ow; }

// The padded plane and the slack its last tile's loads reach into (up to
// kShiftCols - 1 floats past it), in whole cache lines.
int64_t PlaneFloats(const ShiftJob& j) {
  return (int64_t(j.c) * j.hp * j.wp + kShiftCols + 15) / 16 * 16;
}

// The store plans of all wide-column vectors, after the plane.
int64_t PlanCount(const ShiftJob& j) {
  return (Wide(j) + kShiftCols - 1) / kShiftCols * kShiftVecs;
}

VecPlan* Plans(const ShiftJob& j, float* work) {
  return reinterpret_cast<VecPlan*>(work + PlaneFloats(j));
}

}  // namespace

size_t ShiftWorkFloats(const ShiftJob& job) {
  return size_t(PlaneFloats(job)) +
         (size_t(PlanCount(job)) * sizeof(VecPlan) + sizeof(float) - 1) /
             sizeof(float);
}

void ShiftClear(const ShiftJob& j, float* work) {
  std::memset(work, 0, sizeof(float) * PlaneFloats(j));
  VecPlan* plans = Plans(j, work);
  const int64_t P = int64_t(j.oh) * j.ow;
  for (int64_t v = 0; v < PlanCount(j); ++v)
    PlanVec(v * kVW, Wide(j), j.wp, j.ow, P, &plans[v]);
}

void ShiftImage(const ShiftJob& j, int b, float* work) {
  PadImage(j, b, work);
  const int K = j.c * j.kh * j.kw;
  int off[kShiftMaxK];
  for (int cc = 0, k = 0; cc < j.c; ++cc)
    for (int i = 0; i < j.kh; ++i)
      for (int jj = 0; jj < j.kw; ++jj) off[k++] = (cc * j.hp + i) * j.wp + jj;

  const int MR = NnRowsPerTile(j.M);
  const ShiftKernel kernel = ShiftKernelFor(MR);
  const int64_t P = int64_t(j.oh) * j.ow;
  const int64_t Q = Wide(j);
  float* y = j.y + int64_t(b) * j.M * P;
  const VecPlan* plans = Plans(j, work);
  // A row tile walks all columns: its MR output planes are written front to
  // back (planes 4 KiB apart, as 32x32 ones are, would otherwise put every
  // plane's stores of one column tile into the same L1 set).
  for (int m0 = 0; m0 < j.M; m0 += MR) {
    const VecPlan* plan = plans;
    for (int64_t q0 = 0; q0 < Q; q0 += kShiftCols, plan += kShiftVecs)
      kernel(K, j.wt + int64_t(m0) * K, std::min(MR, j.M - m0), work + q0, off,
             j.bias ? j.bias + m0 : nullptr, y + int64_t(m0) * P, P, plan);
  }
}

// ------------------------------------------------------- weight gradient

namespace {

// Register tiles of the weight gradient: RD rows of D (output channels) x
// RB rows of B (taps) of lane-wise sums, plus RD registers for the D vectors
// and one for the B vector. The shape that pads M and K least is used.
struct DwShape {
  int rd, rb;
};
#if SINGA_ISA_LEVEL >= 2
constexpr DwShape kDwShapes[] = {{5, 5}, {4, 6}, {6, 4}};
#else
constexpr DwShape kDwShapes[] = {{4, 3}, {3, 4}};
#endif

DwShape ChooseDwShape(int M, int K) {
  DwShape best = kDwShapes[0];
  int64_t best_cost = INT64_MAX;
  for (const DwShape& s : kDwShapes) {
    const int64_t cost = int64_t((M + s.rd - 1) / s.rd * s.rd) *
                         ((K + s.rb - 1) / s.rb * s.rb);
    if (cost < best_cost) {
      best = s;
      best_cost = cost;
    }
  }
  return best;
}

// acc[i * RB + j] += the lane-wise products of dy's plane i (d + i * P) and
// tap j's window (xp + off[j]), row by row (rows i >= mr repeat plane mr - 1;
// their sums are dropped): output row r of a plane is ow
// floats at r * ow, its window row at r * wp. The last vector of a row
// that ow does not fill is read masked from dy (whose planes need not be
// followed by anything) and whole from xp, whose slack covers it. Where
// that vector is exactly half full (LeNet's first layer, rows of 24, with
// 16-float vectors), the last halves of two rows fill one vector instead:
// that weight gradient took 0.79-0.80x the time at one and two threads,
// rows of 28 with the AVX2 kernels 0.87-0.88x (Zen 5, processes
// alternating).
// The `lines` cache lines from `fetch` (the next tile's dy, see
// ShiftDwImage) are prefetched a few per row, among the multiply-adds.
template <int RD, int RB>
void DwTile(int oh, int ow, int wp, const float* __restrict d, int mr,
            int64_t P, const float* __restrict xq, const int* off,
            Vec* __restrict acc, const float* fetch, int lines) {
  const float* dr[RD];
  const float* br[RB];
  for (int i = 0; i < RD; ++i) dr[i] = d + (i < mr ? i : mr - 1) * P;
  for (int j = 0; j < RB; ++j) br[j] = xq + off[j];
  Vec s[RD][RB];
#pragma GCC unroll 8
  for (int i = 0; i < RD; ++i)
#pragma GCC unroll 8
    for (int j = 0; j < RB; ++j) s[i][j] = acc[i * RB + j];
  const int whole = ow / kVW * kVW, tail = ow - whole;
  const bool pairs = tail == kVW / 2;
  for (int r = 0; r < oh; ++r) {
    PrefetchL2Part(fetch, int64_t(lines) * 16, r, oh);
    for (int p = 0; p < whole; p += kVW) {
      Vec dv[RD];
#pragma GCC unroll 8
      for (int i = 0; i < RD; ++i) dv[i] = Load(dr[i] + p);
#pragma GCC unroll 8
      for (int j = 0; j < RB; ++j) {
        const Vec bv = Load(br[j] + p);
#pragma GCC unroll 8
        for (int i = 0; i < RD; ++i) s[i][j] += dv[i] * bv;
      }
    }
    if (pairs && r % 2 == 1) {
      // the previous row's last half and this row's, in one vector
      Vec dv[RD];
#pragma GCC unroll 8
      for (int i = 0; i < RD; ++i) dv[i] = LoadHalves(dr[i] - ow + whole, dr[i] + whole);
#pragma GCC unroll 8
      for (int j = 0; j < RB; ++j) {
        const Vec bv = LoadHalves(br[j] - wp + whole, br[j] + whole);
#pragma GCC unroll 8
        for (int i = 0; i < RD; ++i) s[i][j] += dv[i] * bv;
      }
    } else if (tail && !(pairs && r + 1 < oh)) {
      Vec dv[RD];
#pragma GCC unroll 8
      for (int i = 0; i < RD; ++i) dv[i] = LoadFirst(dr[i] + whole, tail);
#pragma GCC unroll 8
      for (int j = 0; j < RB; ++j) {
        const Vec bv = Load(br[j] + whole);
#pragma GCC unroll 8
        for (int i = 0; i < RD; ++i) s[i][j] += dv[i] * bv;
      }
    }
#pragma GCC unroll 8
    for (int i = 0; i < RD; ++i) dr[i] += ow;
#pragma GCC unroll 8
    for (int j = 0; j < RB; ++j) br[j] += wp;
  }
#pragma GCC unroll 8
  for (int i = 0; i < RD; ++i)
#pragma GCC unroll 8
    for (int j = 0; j < RB; ++j) acc[i * RB + j] = s[i][j];
}

using DwKernel = void (*)(int, int, int, const float*, int, int64_t,
                          const float*, const int*, Vec*, const float*, int);

DwKernel DwKernelFor(DwShape s) {
#if SINGA_ISA_LEVEL >= 2
  if (s.rd == 5) return DwTile<5, 5>;
  if (s.rd == 4) return DwTile<4, 6>;
  return DwTile<6, 4>;
#else
  if (s.rd == 4) return DwTile<4, 3>;
  return DwTile<3, 4>;
#endif
}

// Work layout: the padded plane (as the forward's), then the sums, tile by
// tile (RD * RB vectors each).
struct DwLayout {
  DwShape shape;
  int mp, kp;     // M and K rounded up to the tile
  int64_t plane;  // floats before the sums
};

DwLayout MakeDwLayout(const ShiftDwJob& j) {
  DwLayout l;
  const int K = j.c * j.kh * j.kw;
  l.shape = ChooseDwShape(j.M, K);
  l.mp = (j.M + l.shape.rd - 1) / l.shape.rd * l.shape.rd;
  l.kp = (K + l.shape.rb - 1) / l.shape.rb * l.shape.rb;
  // The loads of B reach kVW - 1 floats past the plane.
  l.plane = (int64_t(j.c) * j.hp * j.wp + kVW + 15) / 16 * 16;
  return l;
}

}  // namespace

size_t ShiftDwWorkFloats(const ShiftDwJob& job) {
  const DwLayout l = MakeDwLayout(job);
  return size_t(l.plane + int64_t(l.mp) * l.kp * kVW);
}

void ShiftDwClear(const ShiftDwJob& job, float* work) {
  std::memset(work, 0, ShiftDwWorkFloats(job) * sizeof(float));
}

void ShiftDwImage(const ShiftDwJob& j, int b, float* work) {
  const DwLayout l = MakeDwLayout(j);
  PadImage(j, b, work);
  const int64_t P = int64_t(j.oh) * j.ow;
  const float* dy = j.dy + int64_t(b) * j.M * P;
  const int K = j.c * j.kh * j.kw;
  int off[kShiftMaxK + 8];
  for (int cc = 0, k = 0; cc < j.c; ++cc)
    for (int i = 0; i < j.kh; ++i)
      for (int jj = 0; jj < j.kw; ++jj) off[k++] = (cc * j.hp + i) * j.wp + jj;
  // Taps past K (tile padding) read tap 0 again; their sums are dropped.
  for (int k = K; k < l.kp; ++k) off[k] = 0;

  const DwKernel kernel = DwKernelFor(l.shape);
  const int rd = l.shape.rd, rb = l.shape.rb;
  Vec* sums = reinterpret_cast<Vec*>(work + l.plane);
  // A large dy is fetched a tile of rows ahead, a share per tile of taps,
  // spread over the tile's rows: the share at once (about 50 lines for the
  // RGB stem) stalled on free miss buffers, and spread it took 0.87-0.98x
  // the time (stem at batch 32 and 64, 1 and 2 threads, AVX2 EPYC,
  // alternating call by call).
  const bool ahead = int64_t(j.n) * j.M * P >= kFetchAheadFloats;
  const int parts = (l.kp + rb - 1) / rb;
  for (int m0 = 0; m0 < l.mp; m0 += rd) {
    // The next tile's rows: this image's, or after its last tile the next
    // image's first (dy + M * P).
    const bool last = m0 + rd >= j.M;
    const float* next = dy + int64_t(last ? j.M : m0 + rd) * P;
    int64_t floats = 0;
    if (ahead && !last) floats = int64_t(std::min(rd, j.M - m0 - rd)) * P;
    if (ahead && last && b + 1 < j.n) floats = int64_t(std::min(rd, j.M)) * P;
    int part = 0;
    const int64_t lines = (floats + 15) / 16;
    for (int k0 = 0; k0 < l.kp; k0 += rb, sums += rd * rb, ++part) {
      const int64_t l0 = lines * part / parts, l1 = lines * (part + 1) / parts;
      kernel(j.oh, j.ow, j.wp, dy + m0 * P, std::min(rd, j.M - m0), P, work,
             off + k0, sums, next + l0 * 16, int(l1 - l0));
    }
  }
}

void ShiftDwFinish(const ShiftDwJob& j, const float* work, float* dw) {
  const DwLayout l = MakeDwLayout(j);
  const int K = j.c * j.kh * j.kw;
  const int rd = l.shape.rd, rb = l.shape.rb;
  const Vec* sums = reinterpret_cast<const Vec*>(work + l.plane);
  for (int m0 = 0; m0 < l.mp; m0 += rd)
    for (int k0 = 0; k0 < l.kp; k0 += rb, sums += rd * rb)
      for (int i = 0; i < rd && m0 + i < j.M; ++i)
        for (int jj = 0; jj < rb && k0 + jj < K; ++jj) {
          float t = 0.f;
          for (int lane = 0; lane < kVW; ++lane) t += sums[i * rb + jj][lane];
          dw[(m0 + i) * K + k0 + jj] = t;
        }
}

}  // namespace SINGA_ISA_NS
}  // namespace cpu
}  // namespace singa
