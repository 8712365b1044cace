// The weight gradient's lane-wise product for one ISA family, compiled per
// family like conv_isa.cc: dw = dy * windows^T summed as dot products, lane
// by lane, of dy's rows with packed rows of the windows (conv_engine.h).
#include <algorithm>
#include <cstring>
#include <utility>

#include "conv_engine.h"
#include "conv_pack.h"
#include "isa_vec.h"
#include "transpose8.h"

#ifndef SINGA_ISA_NS
#error "conv_nt_isa.cc is compiled per ISA: define SINGA_ISA_NS and SINGA_ISA_LEVEL"
#endif

namespace singa {
namespace cpu {
namespace SINGA_ISA_NS {

namespace {

// acc[i][j] += a[i * lda + 0:len] * b[j * ldb + 0:len] lane by lane, for the
// kNtRows x kNtCols tile; len is a multiple of kVW. The lanes are summed
// once, after the whole reduction (NtBlock), not per call. With segs > 1
// the reduction is segs pieces of len: piece s reads a from s * aseg
// floats on and b from s * len on.
void KernelNT(int len, const float* __restrict a, int64_t lda, int mr,
              const float* __restrict b, int64_t ldb, Vec* __restrict acc,
              int segs = 1, int64_t aseg = 0) {
  // Rows mr..kNtRows-1 repeat row mr-1 (valid memory); their sums are never
  // read.
  const float* ar[kNtRows];
  for (int i = 0; i < kNtRows; ++i) ar[i] = a + int64_t(i < mr ? i : mr - 1) * lda;
  Vec s[kNtRows][kNtCols];
#pragma GCC unroll 8
  for (int i = 0; i < kNtRows; ++i)
#pragma GCC unroll 8
    for (int j = 0; j < kNtCols; ++j) s[i][j] = acc[i * kNtCols + j];
  for (int seg = 0; seg < segs; ++seg, b += len) {
    for (int p = 0; p < len; p += kVW) {
      Vec av[kNtRows];
#pragma GCC unroll 8
      for (int i = 0; i < kNtRows; ++i) av[i] = Load(ar[i] + p);
#pragma GCC unroll 8
      for (int j = 0; j < kNtCols; ++j) {
        const Vec bv = Load(b + j * ldb + p);
#pragma GCC unroll 8
        for (int i = 0; i < kNtRows; ++i) s[i][j] += av[i] * bv;
      }
    }
#pragma GCC unroll 8
    for (int i = 0; i < kNtRows; ++i) ar[i] += aseg;
  }
#pragma GCC unroll 8
  for (int i = 0; i < kNtRows; ++i)
#pragma GCC unroll 8
    for (int j = 0; j < kNtCols; ++j) acc[i * kNtCols + j] = s[i][j];
}

// c[i * ldc + j] = (accumulate ? c : 0) + sum over lanes of the same
// products, for i < mr, j < nr: for reductions short enough to sum in one
// call.
void KernelNTSum(int len, const float* __restrict a, int64_t lda, int mr,
                 const float* __restrict b, int64_t ldb, float* __restrict c,
                 int64_t ldc, int nr, bool accumulate) {
  Vec acc[kNtRows * kNtCols] = {};
  KernelNT(len, a, lda, mr, b, ldb, acc);
  for (int i = 0; i < mr; ++i)
    for (int j = 0; j < nr; ++j) {
      const float t = HSum(acc[i * kNtCols + j]);
      c[i * ldc + j] = accumulate ? c[i * ldc + j] + t : t;
    }
}

// ------------------------------------------------------------- broadcast
// The broadcast form of the same product: B packed transposed, bt[q][k]
// with k fastest, and dy read in place one value at a time, broadcast
// across a vector. A tile of kBtRows rows of c by kBtVecs vectors of
// columns stays in registers over the reduction and holds whole sums, so a
// step loads kBtVecs vectors and kBtRows scalars for kBtRows * kBtVecs
// products, where the lane-wise form loads kNtRows + kNtCols vectors for
// kNtRows * kNtCols and streams its packed B from L2 once per tile row. On
// ResNet's 1x1 stride-2 shortcut the 6 x 4 kernel ran at 94% of the FMA
// peak with bt in cache (Zen 5, one thread), the lane-wise one at about 63%.
#if SINGA_ISA_LEVEL >= 2
constexpr int kBtRows = 6, kBtVecs = 4;
#else
constexpr int kBtRows = 6, kBtVecs = 2;
#endif
// Reduction columns per slice of bt: up to kBtSliceFloats floats (64 KiB,
// kept in L2), and at most kBtMaxSlice columns. That is a whole 16 x 16
// plane for 64 columns of dw; slices of half that size, which stay in L1,
// took 0.94-0.98x the lane-wise time on the 1x1 stride-2 shortcut where
// these took 0.86-0.88x (with an earlier form of the prefetch below).
constexpr int kBtSliceFloats = 16384, kBtMaxSlice = 256;

// c[i * ldc + v * kVW + l] += sum over q < len of a[i * lda + q] *
// bt[q * ldb + v * kVW + l], for i < MR and v < NV; prefetches pf[0:npf]
// into L2 on the way, one every `every` steps.
template <int MR, int NV>
void KernelBT(int len, const float* __restrict a, int64_t lda,
              const float* __restrict bt, int64_t ldb, float* __restrict c,
              int64_t ldc, const char* const* pf, int npf, int every) {
  Vec s[MR][NV];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) s[i][v] = Load(c + i * ldc + v * kVW);
  int pi = 0, wait = 0;
  for (int q = 0; q < len; ++q, bt += ldb) {
    if (pi < npf && --wait <= 0) {
      PrefetchL2(pf[pi++]);
      wait = every;
    }
    Vec b[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) b[v] = Load(bt + v * kVW);
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      const Vec av = Vec{} + a[i * lda + q];
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) s[i][v] += av * b[v];
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) Store(c + i * ldc + v * kVW, s[i][v]);
}

using KernelBTFn = void (*)(int, const float*, int64_t, const float*, int64_t,
                            float*, int64_t, const char* const*, int, int);

template <int MR>
KernelBTFn KernelBTFor(int nv) {
  switch (nv) {
    case 1: return KernelBT<MR, 1>;
#if SINGA_ISA_LEVEL >= 2
    case 2: return KernelBT<MR, 2>;
    case 3: return KernelBT<MR, 3>;
#endif
    default: return KernelBT<MR, kBtVecs>;
  }
}

// The kernel for an mr x nv tile (mr <= kBtRows, nv <= kBtVecs).
KernelBTFn KernelBTFor(int mr, int nv) {
  switch (mr) {
    case 1: return KernelBTFor<1>(nv);
    case 2: return KernelBTFor<2>(nv);
    case 3: return KernelBTFor<3>(nv);
    case 4: return KernelBTFor<4>(nv);
    case 5: return KernelBTFor<5>(nv);
    default: return KernelBTFor<kBtRows>(nv);
  }
}

// t[j * ldt + i] = s[i * lds + j] for a kVW x kVW block.
#if SINGA_ISA_LEVEL >= 2
// Four rounds of two-input shuffles with constant indices (vunpcklps and
// the like): pairs of rows interleaved by floats, then by pairs of floats,
// then 128-bit lanes gathered twice. (The generic form below builds its
// indices at run time here, which took a sixth of the weight gradient's
// time on LeNet's second layer.)
inline void TransposeBlock(const float* s, int64_t lds, float* t,
                           int64_t ldt) {
  const IVec by1_lo{0, 16, 1, 17, 4, 20, 5, 21, 8, 24, 9, 25, 12, 28, 13, 29};
  const IVec by1_hi{2,  18, 3,  19, 6,  22, 7,  23,
                    10, 26, 11, 27, 14, 30, 15, 31};
  const IVec by2_lo{0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29};
  const IVec by2_hi{2,  3,  18, 19, 6,  7,  22, 23,
                    10, 11, 26, 27, 14, 15, 30, 31};
  const IVec even4{0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27};
  const IVec odd4{4,  5,  6,  7,  12, 13, 14, 15,
                  20, 21, 22, 23, 28, 29, 30, 31};
  Vec r[16], u[16];
  for (int i = 0; i < 16; ++i) r[i] = Load(s + i * lds);
  for (int i = 0; i < 16; i += 2) {
    u[i] = __builtin_shuffle(r[i], r[i + 1], by1_lo);
    u[i + 1] = __builtin_shuffle(r[i], r[i + 1], by1_hi);
  }
  for (int i = 0; i < 16; i += 4)
    for (int h = 0; h < 2; ++h) {
      r[i + 2 * h] = __builtin_shuffle(u[i + h], u[i + h + 2], by2_lo);
      r[i + 2 * h + 1] = __builtin_shuffle(u[i + h], u[i + h + 2], by2_hi);
    }
  // r[4g + m] holds rows 4g..4g+3 of columns 4L + m in its 128-bit lane L.
  for (int m = 0; m < 4; ++m) {
    const Vec a = __builtin_shuffle(r[m], r[4 + m], even4);
    const Vec b = __builtin_shuffle(r[m], r[4 + m], odd4);
    const Vec c = __builtin_shuffle(r[8 + m], r[12 + m], even4);
    const Vec d = __builtin_shuffle(r[8 + m], r[12 + m], odd4);
    Store(t + m * ldt, __builtin_shuffle(a, c, even4));
    Store(t + (8 + m) * ldt, __builtin_shuffle(a, c, odd4));
    Store(t + (4 + m) * ldt, __builtin_shuffle(b, d, even4));
    Store(t + (12 + m) * ldt, __builtin_shuffle(b, d, odd4));
  }
}
#elif SINGA_ISA_LEVEL == 1
inline void TransposeBlock(const float* s, int64_t lds, float* t,
                           int64_t ldt) {
  Transpose8x8(s, lds, t, ldt);
}
#else
// log2(kVW) rounds of two-input shuffles: round b swaps bit b of the row
// with bit b of the column.
inline void TransposeBlock(const float* s, int64_t lds, float* t,
                           int64_t ldt) {
  Vec r[kVW];
  for (int i = 0; i < kVW; ++i) r[i] = Load(s + i * lds);
  for (int b = kVW / 2; b >= 1; b /= 2) {
    IVec lo, hi;
    for (int j = 0; j < kVW; ++j) {
      lo[j] = (j & b) ? kVW + j - b : j;
      hi[j] = (j & b) ? kVW + j : j + b;
    }
    for (int i = 0; i < kVW; ++i)
      if (!(i & b)) {
        const Vec u = __builtin_shuffle(r[i], r[i + b], lo);
        r[i + b] = __builtin_shuffle(r[i], r[i + b], hi);
        r[i] = u;
      }
  }
  for (int j = 0; j < kVW; ++j) Store(t + j * ldt, r[j]);
}
#endif

}  // namespace

// ---------------------------------------------------------------------- NT

int NtRowsPerTile() { return kNtCols; }

// The reduction is packed kNtCols-wide blocks of columns at a time, and
// swept kNtChunk columns at a time so that a tile's rows of dy stay in L1
// while the rows of B stream from L2.
constexpr int64_t kNtBlock = 1024;
constexpr int kNtChunk = 512;
// At most this many floats of the next image (its dy plane and the input
// channels of this block) are prefetched into L2 while an image is summed.
constexpr int64_t kNtAheadFloats = int64_t(1) << 17;

size_t NtWorkFloats(const NtJob& job, int64_t cols, int rows) {
  (void)cols;
  const int64_t mp = RoundUp(job.M, kNtRows), kp = RoundUp(rows, kNtCols);
  // The broadcast form: the sums [M][kt], a slice of bt and the kVW rows
  // of B packed before their transposition.
  const int64_t kt = RoundUp(rows, kVW);
  const int64_t bt = job.M * kt + kBtMaxSlice * kt + kVW * kBtMaxSlice;
  return size_t(std::max(mp * kp * kVW + kp * kNtBlock, bt));
}

namespace {

// PackNt's rows [k0, k1) over reduction columns [r0, r1) when they are
// whole images of a grid of at most one vector of pixels, from input
// planes of at most four vectors (AVX-512 only; false otherwise): each
// (channel, image) plane is loaded into registers once, and each tap's
// pixels are taken from it by two-register permutes, lanes in the padding
// cleared. Copying the taps run by run instead spends a call and its
// bounds work on every few floats (rows of 4 on ResNet-18's 4x4 grids):
// the packing held 18% of its 256->512 stride-2 weight gradient, which now
// takes 0.87-0.92x the time at one thread and 0.81-0.94x at two at batch
// 64, 0.85-0.91x at one thread at batch 32 (Zen 5, processes alternating).
bool PackSmallPlanes(const NtJob& job, int64_t r0, int64_t r1, int k0,
                     int k1, float* pb, int lp) {
#if SINGA_ISA_LEVEL >= 2 && defined(__AVX512F__)
  const TapRows& t = job.b;
  const Grid& grid = job.grid;
  const int P = grid.gh * grid.gw, plane = t.sh * t.sw;
  const int taps = t.tr * t.tc;
  if (P > kVW || plane > 4 * kVW || taps > 64 || r0 % P || r1 % P) return false;
  const int64_t b0 = r0 / P, b1 = r1 / P;
  __m512i idx[64];
  __mmask16 high[64], valid[64];
  for (int k = 0; k < taps; ++k) {
    const int i = k / t.tc, j = k % t.tc;
    alignas(64) int lane[16] = {};
    unsigned hi = 0, ok = 0;
    for (int q = 0; q < P; ++q) {
      const int y = q / grid.gw * t.ssy + t.offy[i];
      const int x = q % grid.gw * t.ssx + t.offx[j];
      if (y < 0 || y >= t.sh || x < 0 || x >= t.sw) continue;
      const int at = y * t.sw + x;
      lane[q] = at % 32;
      if (at >= 32) hi |= 1u << q;
      ok |= 1u << q;
    }
    idx[k] = _mm512_load_si512(lane);
    high[k] = __mmask16(hi);
    valid[k] = __mmask16(ok);
  }
  const __mmask16 pmask = __mmask16((1u << P) - 1u);
  TapCursor at(t, k0);
  for (int k = k0; k < k1;) {
    const int c = at.c, first = at.i * t.tc + at.j;
    const int n = std::min(taps - first, k1 - k);
    const float* chan = t.src + int64_t(c) * t.cstride;
    for (int64_t b = b0; b < b1; ++b) {
      const float* src = chan + b * t.img_stride;
      __m512 v[4];
      for (int r = 0; r < 4; ++r)
        v[r] = _mm512_maskz_loadu_ps(
            __mmask16(LaneMask(0, plane - r * kVW)), src + r * kVW);
      float* out = pb + (b - b0) * P;
      for (int u = 0; u < n; ++u) {
        const int tap = first + u;
        const __m512 lo = _mm512_permutex2var_ps(v[0], idx[tap], v[1]);
        const __m512 hi = _mm512_permutex2var_ps(v[2], idx[tap], v[3]);
        const __m512 px = _mm512_maskz_mov_ps(
            valid[tap], _mm512_mask_blend_ps(high[tap], lo, hi));
        _mm512_mask_storeu_ps(out + int64_t(k - k0 + u) * lp, pmask, px);
      }
    }
    k += n;
    at.i = 0;
    at.j = 0;
    ++at.c;
  }
  return true;
#else
  (void)job, (void)r0, (void)r1, (void)k0, (void)k1, (void)pb, (void)lp;
  return false;
#endif
}

// Packs reduction columns [r0, r1) of B rows [k0, k1) into pb, lp floats
// per row, zero-padded to whole tiles.
void PackNt(const NtJob& job, int64_t r0, int64_t r1, int lp, int k0, int k1,
            float* pb) {
  const int len = int(r1 - r0);
  const int kb = k1 - k0, kbp = int(RoundUp(kb, kNtCols));
  if (!PackSmallPlanes(job, r0, r1, k0, k1, pb, lp)) {
    NnScratch& sc = NnLocal();
    BuildRuns(job.grid, r0, r1, 0, &sc.runs);
    PackRows(job.b, sc.runs.begin(), sc.runs.count, TapCursor(job.b, k0), kb, pb,
             lp, [](const Run& r) { return int64_t(r.col); });
  }
  for (int k = 0; k < kbp; ++k)
    Zero(pb + int64_t(k) * lp + (k < kb ? len : 0), k < kb ? lp - len : lp);
}

// A 1x1 kernel's rows of B over one slice of the grid, for the broadcast
// form: copied directly (OneTapRuns), and the lines of x the slice reads
// listed for the prefetch in NtBlockBroadcast.
class OneTapSlice {
 public:
  // False (packed by PackRows) where OneTapRuns does not apply.
  bool Build(const TapRows& t, const Grid& grid, int64_t r0, int64_t r1) {
    if (t.tr != 1 || t.tc != 1) return false;
    BuildRuns(grid, r0, r1, 0, &runs_);
    return taps_.Build(t, runs_.begin(), runs_.count);
  }
  // Rows [k0, k1) of B into dst, lp floats per row, zero past the slice.
  void Pack(const TapRows& t, int k0, int k1, int len, int lp,
            float* dst) const {
    taps_.Pack(t, k0, k1 - k0, dst, lp,
               [](const Run& r) { return int64_t(r.col); }, false);
    for (int k = 0; k < k1 - k0; ++k)
      Zero(dst + int64_t(k) * lp + len, lp - len);
  }

  // The cache lines that Pack reads for rows [k0, k1), into out; returns
  // their count.
  int Lines(const TapRows& t, int k0, int k1, Buffer<const char*>* out) {
    // The lines of one channel, as offsets from its first float's line.
    const uintptr_t base = uintptr_t(t.src) & ~uintptr_t(63);
    const int64_t* offs = taps_.offsets();
    size_t most = 0;
    for (int u = 0; u < runs_.count; ++u)
      most += size_t(runs_.begin()[u].len - 1) * t.ssx / 16 + 2;
    int64_t* lo = line_offs_.Reserve(most);
    int per = 0;
    for (int u = 0; u < runs_.count; ++u) {
      const float* s = t.src + offs[u];
      const uintptr_t e = uintptr_t(s + (runs_.begin()[u].len - 1) * t.ssx);
      for (uintptr_t l = uintptr_t(s) & ~uintptr_t(63); l <= e; l += 64)
        lo[per++] = int64_t(l - base);
    }
    const char** o = out->Reserve(size_t(per) * (k1 - k0));
    int n = 0;
    for (int k = k0; k < k1; ++k) {
      const char* c = reinterpret_cast<const char*>(base) +
                      int64_t(k) * t.cstride * int64_t(sizeof(float));
      for (int l = 0; l < per; ++l) o[n++] = c + lo[l];
    }
    return n;
  }

 private:
  Runs runs_;
  OneTapRuns taps_;
  Buffer<int64_t> line_offs_;
};

// NtBlock's long reduction in the broadcast form: slices of the reduction
// (within one plane of D) are packed into bt a kVW-row block of B at a
// time and transposed, then every tile row of c sweeps the slice, its dy
// rows read in place. The sums build up in `sums` ([M][kt]) and reach c at
// the end.
//
// With one-tap rows the lines of x that the next slice packs are fetched
// into L2 while this one is summed, spread evenly over the kernel's steps:
// the pack otherwise waits on memory, one miss after another (the
// shortcut's stride-2 rows are 128 bytes, 256 apart, and every channel
// starts a new page). That took the shortcut from 0.92x to 0.82x the
// lane-wise time at one thread and from 0.91x to 0.82x at two. The
// lane-wise form's prefetch of whole images (NtBlock), which fetches every
// row, needed or not, a burst per kernel call, was about even with none
// here (0.92-1.03x).
void NtBlockBroadcast(const NtJob& job, int64_t q0, int64_t q1, int k0,
                      int k1, float* c, int64_t ldc, bool accumulate,
                      float* work) {
  const int M = job.M, kb = k1 - k0, kt = int(RoundUp(kb, kVW));
  const int slice = int(std::clamp<int64_t>(
      kBtSliceFloats / kt / kVW * kVW, kVW, kBtMaxSlice));
  float* sums = work;
  float* bt = sums + int64_t(M) * kt;
  float* stage = bt + int64_t(kBtMaxSlice) * kt;
  Zero(sums, M * kt);
  // The slice summed now and the next one, whose lines are fetched ahead;
  // the next is built once and becomes the current one (`ready`).
  thread_local OneTapSlice taps[2];
  thread_local Buffer<const char*> lines;
  OneTapSlice* one_tap = &taps[0];
  OneTapSlice* next_tap = &taps[1];
  bool ready = false;
  NnScratch& sc = NnLocal();
  // The end of the slice that starts at r0.
  auto slice_end = [&](int64_t r0) {
    return std::min({q1, r0 + slice, (r0 / job.dplane + 1) * job.dplane});
  };
  for (int64_t r0 = q0; r0 < q1;) {
    const int64_t plane = r0 / job.dplane, r1 = slice_end(r0);
    const int len = int(r1 - r0), lp = int(RoundUp(len, kVW));
    const bool direct = ready || one_tap->Build(job.b, job.grid, r0, r1);
    int nlines = 0;
    ready = direct && r1 < q1 &&
            next_tap->Build(job.b, job.grid, r1, slice_end(r1));
    if (ready) nlines = next_tap->Lines(job.b, k0, k1, &lines);
    if (!direct) BuildRuns(job.grid, r0, r1, 0, &sc.runs);
    for (int ks = k0; ks < k1; ks += kVW) {
      const int ke = std::min(k1, ks + kVW);
      if (direct) {
        one_tap->Pack(job.b, ks, ke, len, lp, stage);
      } else {
        PackRows(job.b, sc.runs.begin(), sc.runs.count, TapCursor(job.b, ks),
                 ke - ks, stage, lp,
                 [](const Run& r) { return int64_t(r.col); });
        for (int k = 0; k < ke - ks; ++k)
          Zero(stage + int64_t(k) * lp + len, lp - len);
      }
      // Rows past B's last are zero, so its padding columns sum to zero.
      for (int k = ke - ks; k < kVW; ++k) Zero(stage + int64_t(k) * lp, lp);
      for (int q = 0; q < lp; q += kVW)
        TransposeBlock(stage + q, lp, bt + int64_t(q) * kt + (ks - k0), kt);
    }
    const float* d = job.d + plane * job.d_img + (r0 - plane * job.dplane);
    const int tiles_j = (kt + kBtVecs * kVW - 1) / (kBtVecs * kVW);
    const int parts = (M + kBtRows - 1) / kBtRows * tiles_j;
    for (int i = 0; i < M; i += kBtRows) {
      const int mr = std::min(kBtRows, M - i);
      for (int j = 0; j < kt; j += kBtVecs * kVW) {
        const int nv = std::min(kBtVecs, (kt - j) / kVW);
        // This call's share of the next slice's lines, one every `every`
        // steps.
        const int part = i / kBtRows * tiles_j + j / (kBtVecs * kVW);
        const int l0 = int(int64_t(nlines) * part / parts);
        const int l1 = int(int64_t(nlines) * (part + 1) / parts);
        const int every = l1 > l0 ? std::max(1, len / (l1 - l0)) : 1;
        KernelBTFor(mr, nv)(len, d + int64_t(i) * job.ldd, job.ldd, bt + j,
                            kt, sums + int64_t(i) * kt + j, kt,
                            lines.data() + l0, l1 - l0, every);
      }
    }
    std::swap(one_tap, next_tap);
    r0 = r1;
  }
  for (int i = 0; i < M; ++i) {
    float* o = c + int64_t(i) * ldc + k0;
    const float* v = sums + int64_t(i) * kt;
    for (int j = 0; j < kb; ++j) o[j] = accumulate ? o[j] + v[j] : v[j];
  }
}

// Whether a long reduction is summed in the broadcast form: with AVX-512
// vectors. Against the lane-wise form at batch 32 and 64 (Zen 5, one and
// two threads, alternating call by call) it took 0.76-0.80x the time on
// ResNet-18's 1x1 stride-2 shortcut, 0.79-0.87x on its 128->256 stride-2
// layer, 0.89-0.94x on the 64->128 one, 0.89-0.95x on a 5x5 stride-2 one,
// 0.96-0.99x on a 5x5 64@16 one and 0.86-0.96x on LeNet's second layer.
// With AVX2 vectors (6 x 2 tiles) it took 1.03-1.25x the time of the
// lane-wise form, which there runs at 77-85% of that family's peak: AVX2
// keeps it. Reductions that fit one packed block keep the lane-wise sum in
// one call (ResNet-18's 256->512 stride-2 layer at batch 32 and 64:
// 1.07-1.09x in the broadcast form).
bool BroadcastPays() { return kVW >= 16; }

}  // namespace

void NtBlock(const NtJob& job, int64_t q0, int64_t q1, int k0, int k1,
             float* c, int64_t ldc, bool accumulate, float* work) {
  const int M = job.M, Mp = int(RoundUp(M, kNtRows));
  if (q1 <= q0) {
    if (!accumulate)
      for (int i = 0; i < M; ++i) Zero(c + int64_t(i) * ldc + k0, k1 - k0);
    return;
  }
  const PathMode mode = NtBroadcastMode();
  const bool one_block =
      q1 - q0 <= kNtBlock && q0 / job.dplane == (q1 - 1) / job.dplane;
  if (mode == PathMode::kForce ||
      (mode == PathMode::kAuto && !one_block && BroadcastPays())) {
    NtBlockBroadcast(job, q0, q1, k0, k1, c, ldc, accumulate, work);
    return;
  }
  if (one_block) {
    // One packed block of the reduction: B is packed a slice of about
    // 256 KB at a time, and each tile is summed in one call.
    const int len = int(q1 - q0), lp = int(RoundUp(len, kVW));
    float* pb = work;
    const int slice = int(std::max<int64_t>(
        kNtCols, (int64_t(1) << 16) / lp / kNtCols * kNtCols));
    for (int s0 = k0; s0 < k1; s0 += slice) {
      const int s1 = std::min(k1, s0 + slice), kb = s1 - s0;
      PackNt(job, q0, q1, lp, s0, s1, pb);
      for (int i = 0; i < M; i += kNtRows)
        for (int j = 0; j < kb; j += kNtCols)
          KernelNTSum(lp,
                      job.d + q0 / job.dplane * job.d_img + q0 % job.dplane +
                          int64_t(i) * job.ldd,
                      job.ldd,
                      std::min(kNtRows, M - i), pb + int64_t(j) * lp, lp,
                      c + int64_t(i) * ldc + s0 + j, ldc,
                      std::min(kNtCols, kb - j), accumulate);
    }
    return;
  }
  // A long reduction: B rows [k0, k1) are accumulated lane-wise in `wide`
  // over blocks of kNtBlock columns, swept kNtChunk columns at a time so
  // that a tile's dy rows stay in L1 while the rows of B stream from L2;
  // the lanes are summed at the end.
  const int kb = k1 - k0, kbp = int(RoundUp(kb, kNtCols));
  const int tiles_j = kbp / kNtCols;
  Vec* wide = reinterpret_cast<Vec*>(work);  // [Mp / kNtRows][tiles_j][tile]
  float* pb = work + int64_t(Mp) * kbp * kVW;
  for (int64_t t = 0; t < int64_t(Mp) * kbp; ++t) wide[t] = Vec{};
  // dy read in place in planes of at most half a block, against at most
  // 128 rows of B: a block takes whole planes (images) up to kNtBlock
  // columns, and each tile sums them in one call, its sums staying in
  // registers from plane to plane (ResNet-18's 1x1 stride-2 shortcut,
  // 16x16 planes: 0.81-0.90x the time at one thread, even at two; its 3x3
  // stride-2 layer, 576 rows, 0.97-0.99x at one thread but 1.04-1.06x at
  // two, so it keeps one plane per block; Zen 5, alternating call by call).
  // With AVX2 vectors that shortcut took 1.02-1.05x the time (the AVX2
  // kernels on the same host, alternating processes): AVX-512 only, where
  // long reductions now take the broadcast form unless it is switched off
  // (BroadcastPays).
  const bool multi = kVW >= 16 && job.d_img > 0 && job.dplane % kVW == 0 &&
                     2 * job.dplane <= kNtBlock && k1 - k0 <= 128;
  for (int64_t r0 = q0; r0 < q1;) {
    // Blocks stay within one plane of D, or take whole ones (multi).
    const int64_t plane = r0 / job.dplane;
    int64_t r1 =
        std::min({q1, r0 + kNtBlock, (plane + 1) * job.dplane});
    int segs = 1;
    if (multi && r0 == plane * job.dplane && r1 == (plane + 1) * job.dplane) {
      while (r1 + job.dplane <= q1 && r1 + job.dplane - r0 <= kNtBlock)
        r1 += job.dplane;
      segs = int((r1 - r0) / job.dplane);
    }
    const int lp = int(RoundUp(r1 - r0, kVW));
    const float* d = job.d + plane * job.d_img + (r0 - plane * job.dplane);
    PackNt(job, r0, r1, lp, k0, k1, pb);
    // When this block is a whole image read in place and the next image is
    // in the range, its dy plane and input channels are prefetched into L2,
    // a slice per tile: the hardware prefetchers do not follow the jump to
    // the next image, and a memory-bound layer (ResNet's 1x1 stride-2
    // shortcut) otherwise waits on memory at every image. A slice per row
    // of tiles instead (about 140 lines at once for that layer) stalled
    // on the prefetches themselves, which wait for free miss buffers: the
    // slices per tile took 0.78x the time at one thread and 0.92x at two
    // (AVX2 EPYC, Zen 4, batch 64, alternating call by call).
    const int64_t next = plane + segs;
    const int taps = job.b.tr * job.b.tc;
    const int ch0 = k0 / taps, ch1 = (k1 - 1) / taps + 1;
    const float* nx =
        job.b.src + next * job.b.img_stride + int64_t(ch0) * job.b.cstride;
    const float* nd = job.d + next * job.d_img;
    const int64_t nx_len = int64_t(ch1 - ch0) * job.b.cstride;
    const int64_t nd_len = int64_t(M) * job.ldd;
    const bool ahead = !job.b.channel_fastest && job.d_img > 0 &&
                       r0 == plane * job.dplane && r1 == next * job.dplane &&
                       (next + 1) * job.dplane <= q1 &&
                       nx_len + nd_len <= kNtAheadFloats;
    const int parts = Mp / kNtRows * tiles_j;
    // Whole planes go to each tile in one call, a plane per piece.
    const int chunk = segs > 1 ? lp : kNtChunk;
    for (int ch = 0; ch < lp; ch += chunk) {
      const int n = segs > 1 ? int(job.dplane) : std::min(kNtChunk, lp - ch);
      for (int i = 0; i < Mp; i += kNtRows) {
        for (int j = 0; j < tiles_j; ++j) {
          if (ahead && ch == 0) {
            const int part = i / kNtRows * tiles_j + j;
            PrefetchL2Part(nx, nx_len, part, parts);
            PrefetchL2Part(nd, nd_len, part, parts);
          }
          KernelNT(n, d + int64_t(i) * job.ldd + ch, job.ldd,
                   std::min(kNtRows, M - i),
                   pb + int64_t(j) * kNtCols * lp + ch, lp,
                   wide + (int64_t(i / kNtRows) * tiles_j + j) * kNtRows *
                              kNtCols,
                   segs, job.d_img);
        }
      }
    }
    r0 = r1;
  }
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < kb; ++j) {
      const Vec* tile = wide + (int64_t(i / kNtRows) * tiles_j + j / kNtCols) *
                                   kNtRows * kNtCols;
      const float v = HSum(tile[(i % kNtRows) * kNtCols + j % kNtCols]);
      float& o = c[int64_t(i) * ldc + k0 + j];
      o = accumulate ? o + v : v;
    }
}

}  // namespace SINGA_ISA_NS
}  // namespace cpu
}  // namespace singa
