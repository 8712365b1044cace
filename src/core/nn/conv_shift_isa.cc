// The flat-shift forward (conv_shift.h) for one ISA family.
//
// Register tile: MR output channels x kShiftVecs vectors of wide columns,
// the register budget of conv_isa.cc's KernelNN, and MR chosen by the same
// rule. The B vectors of tap k are loaded straight from the padded
// plane at xp + off[k] + column; the weights are broadcast from w. A tile is
// done with one pass over the whole reduction, so it starts from the bias
// and is stored once.
#include <algorithm>
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

// Writes lanes [lo, hi) of v to p + lane; the other lanes' addresses are
// not touched (they may lie outside the output).
#if SINGA_ISA_LEVEL >= 2 && defined(__AVX512F__)
inline void StoreLanes(float* p, Vec v, int lo, int hi) {
  const unsigned below_hi = hi >= 16 ? 0xffffu : (1u << hi) - 1u;
  const unsigned below_lo = (1u << lo) - 1u;
  _mm512_mask_storeu_ps(p, __mmask16(below_hi & ~below_lo), __m512(v));
}
#elif SINGA_ISA_LEVEL == 1 && defined(__AVX2__)
inline void StoreLanes(float* p, Vec v, int lo, int hi) {
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i mask =
      _mm256_and_si256(_mm256_cmpgt_epi32(lane, _mm256_set1_epi32(lo - 1)),
                       _mm256_cmpgt_epi32(_mm256_set1_epi32(hi), lane));
  _mm256_maskstore_ps(p, mask, __m256(v));
}
#else
inline void StoreLanes(float* p, Vec v, int lo, int hi) {
  for (int l = lo; l < hi; ++l) p[l] = v[l];
}
#endif

// Where the lanes of one vector of wide columns go in an output plane:
// segment g holds lanes [lo[g], hi[g]), stored at plane + at[g] + lane.
// `whole`: one segment of all lanes (a plain store).
struct VecPlan {
  int segs;
  bool whole;
  int64_t at[kVW];
  int lo[kVW], hi[kVW];
};

// The plan of wide columns [c0, c0 + kVW), of which those below q_end
// exist.
void PlanVec(int64_t c0, int64_t q_end, int wp, int ow, VecPlan* pl) {
  pl->segs = 0;
  int64_t c = c0;
  const int64_t end = std::min(c0 + kVW, q_end);
  while (c < end) {
    const int64_t oy = c / wp, ox = c - oy * wp;
    if (ox >= ow) {
      c = (oy + 1) * wp;
      continue;
    }
    const int64_t stop = std::min(end, oy * wp + ow);
    const int g = pl->segs++;
    pl->lo[g] = int(c - c0);
    pl->hi[g] = int(stop - c0);
    pl->at[g] = oy * ow + ox - pl->lo[g];
    c = stop;
  }
  pl->whole = pl->segs == 1 && pl->lo[0] == 0 && pl->hi[0] == kVW;
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
#pragma GCC unroll 4
  for (int v = 0; v < kShiftVecs; ++v) {
    const VecPlan& pl = plan[v];
    if (pl.whole) {
#pragma GCC unroll 16
      for (int i = 0; i < MR; ++i)
        if (i < mr) Store(y + i * P + pl.at[0], s[i][v]);
    } else {
      for (int g = 0; g < pl.segs; ++g)
#pragma GCC unroll 16
        for (int i = 0; i < MR; ++i)
          if (i < mr) StoreLanes(y + i * P + pl.at[g], s[i][v], pl.lo[g], pl.hi[g]);
    }
  }
}

#if SINGA_ISA_LEVEL >= 2
constexpr int kRowChoices[] = {12, 10, 8};
#else
constexpr int kRowChoices[] = {6, 5, 4};
#endif
constexpr float kRowSpeed[] = {1.f, 0.95f, 0.92f};

// The row count whose padded tiles cost least for M rows.
int ShiftRows(int M) {
  int best = kRowChoices[0];
  float best_cost = 1e30f;
  for (int i = 0; i < 3; ++i) {
    const int padded = (M + kRowChoices[i] - 1) / kRowChoices[i] * kRowChoices[i];
    const float cost = float(padded) / kRowSpeed[i];
    if (cost < best_cost) {
      best = kRowChoices[i];
      best_cost = cost;
    }
  }
  return best;
}

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

int64_t PlaneFloats(const ShiftJob& j) { return int64_t(j.c) * j.hp * j.wp; }

}  // namespace

size_t ShiftWorkFloats(const ShiftJob& job) {
  // The last tile's loads reach kShiftCols - 1 floats past the plane.
  return size_t(PlaneFloats(job) + kShiftCols + kVW);
}

void ShiftClear(const ShiftJob& job, float* work) {
  std::memset(work, 0, ShiftWorkFloats(job) * sizeof(float));
}

void ShiftImage(const ShiftJob& j, int b, float* work) {
  const int64_t plane = int64_t(j.h) * j.w;
  const float* x = j.x + int64_t(b) * j.c * plane;
  for (int cc = 0; cc < j.c; ++cc)
    for (int r = 0; r < j.h; ++r)
      std::memcpy(work + (int64_t(cc) * j.hp + j.pad_t + r) * j.wp + j.pad_l,
                  x + cc * plane + int64_t(r) * j.w, sizeof(float) * j.w);
  const int K = j.c * j.kh * j.kw;
  int off[kShiftMaxK];
  for (int cc = 0, k = 0; cc < j.c; ++cc)
    for (int i = 0; i < j.kh; ++i)
      for (int jj = 0; jj < j.kw; ++jj) off[k++] = (cc * j.hp + i) * j.wp + jj;

  const int MR = ShiftRows(j.M);
  const ShiftKernel kernel = ShiftKernelFor(MR);
  const int64_t P = int64_t(j.oh) * j.ow;
  const int64_t Q = int64_t(j.oh - 1) * j.wp + j.ow;
  float* y = j.y + int64_t(b) * j.M * P;
  VecPlan plan[kShiftVecs];
  for (int64_t q0 = 0; q0 < Q; q0 += kShiftCols) {
    for (int v = 0; v < kShiftVecs; ++v)
      PlanVec(q0 + v * kVW, Q, j.wp, j.ow, &plan[v]);
    for (int m0 = 0; m0 < j.M; m0 += MR)
      kernel(K, j.wt + int64_t(m0) * K, std::min(MR, j.M - m0), work + q0, off,
             j.bias ? j.bias + m0 : nullptr, y + int64_t(m0) * P, P, plan);
  }
}

}  // namespace SINGA_ISA_NS
}  // namespace cpu
}  // namespace singa
