// The weight gradient's lane-wise product for one ISA family, compiled per
// family like conv_isa.cc: dw = dy * windows^T summed as dot products, lane
// by lane, of dy's rows with packed rows of the windows (conv_engine.h).
#include <algorithm>
#include <cstring>

#include "conv_engine.h"
#include "conv_pack.h"
#include "isa_vec.h"

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
  return size_t(mp * kp * kVW + kp * kNtBlock);
}

namespace {

// Packs reduction columns [r0, r1) of B rows [k0, k1) into pb, lp floats
// per row, zero-padded to whole tiles.
void PackNt(const NtJob& job, int64_t r0, int64_t r1, int lp, int k0, int k1,
            float* pb) {
  NnScratch& sc = NnLocal();
  const int len = int(r1 - r0);
  const int kb = k1 - k0, kbp = int(RoundUp(kb, kNtCols));
  BuildRuns(job.grid, r0, r1, 0, &sc.runs);
  PackRows(job.b, sc.runs.begin(), sc.runs.count, TapCursor(job.b, k0), kb, pb,
           lp, [](const Run& r) { return int64_t(r.col); });
  for (int k = 0; k < kbp; ++k)
    Zero(pb + int64_t(k) * lp + (k < kb ? len : 0), k < kb ? lp - len : lp);
}

}  // namespace

void NtBlock(const NtJob& job, int64_t q0, int64_t q1, int k0, int k1,
             float* c, int64_t ldc, bool accumulate, float* work) {
  const int M = job.M, Mp = int(RoundUp(M, kNtRows));
  if (q1 <= q0) {
    if (!accumulate)
      for (int i = 0; i < M; ++i) Zero(c + int64_t(i) * ldc + k0, k1 - k0);
    return;
  }
  if (q1 - q0 <= kNtBlock && q0 / job.dplane == (q1 - 1) / job.dplane) {
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
  // kernels on the same host, alternating processes): AVX-512 only.
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
