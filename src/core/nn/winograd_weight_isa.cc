// Winograd F(3x3, 2x2) weight gradient for one ISA family (the math is in
// winograd_weight.h).
//
// Tiles are numbered by tile row (image, ty) and column tx, and taken a
// block of tile rows at a time. For a block, the transformed x tiles go to
// V[pos][tile][c] and the transformed dy tiles to Z[pos][tile][k], channels
// fastest, so both transforms run on whole vectors of channels; then for
// each of the 16 positions M[pos] (+)= Z[pos]^T V[pos], a product whose
// reduction runs over the block's tiles. A block is sized so one position's
// V stays in L2 while the register tiles sweep it. Last, dw = A^T M A.
//
// Threads share the work of each phase (tile rows for the transforms,
// position and row-panel of M for the products, rows of dw at the end);
// every element of M is always summed by one thread over the tiles in the
// same order, so the result does not depend on the schedule.
#ifdef _OPENMP
#include <omp.h>
#endif

#include <algorithm>
#include <cstdint>
#include <vector>

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
constexpr int kPos = 16;
// Below this many multiply-adds (direct count) a call runs on one thread.
constexpr int64_t kParallelMacs = int64_t(1) << 18;

inline Vec Splat(float v) { return Vec{} + v; }

int64_t RoundUp(int64_t a, int64_t b) { return (a + b - 1) / b * b; }

// A row stride of an odd number of 64-byte lines, so that walking down a
// column of V or Z spreads over every L1 set.
int64_t OddLines(int64_t floats) {
  floats = RoundUp(floats, 16);
  return (floats / 16) % 2 ? floats : floats + 16;
}

// 64-byte aligned scratch kept between calls; slot 0 is per thread, slot 1
// the calling thread's shared V, Z and M.
float* Scratch(size_t floats, int slot) {
  thread_local std::vector<float> bufs[2];
  std::vector<float>& buf = bufs[slot];
  if (buf.size() < floats + 16) buf.resize(floats + 16);
  const uintptr_t at = reinterpret_cast<uintptr_t>(buf.data());
  return buf.data() + ((64 - at % 64) % 64) / sizeof(float);
}

struct Plan {
  const ConvParams* p;
  int oh, ow;
  int tx, ty;    // tiles per row, tile rows per image
  int cp;        // input channels rounded up to kNR: the columns of V and M
  int kp;        // output channels rounded up to kMR: the rows of M
  int kz;        // kp rounded up to kVW: the columns of Z
  int64_t ldv, ldz;
  int64_t tb;    // tiles per block (the position planes' height)
  float *v, *z, *m;
};

// Copies `rows` rows of channels [c0, c0 + kVW) of image plane `src`
// (rows y0.., columns x0.. for `cols` columns) into s[row][col][lane], zero
// outside the plane and for channels at or past `chans`.
void GatherRows(const float* src, int64_t cstride, int h, int w, int chans,
                int c0, int y0, int rows, int x0, int cols, float* s) {
  const int lo = std::clamp(-x0, 0, cols), hi = std::clamp(w - x0, 0, cols);
  for (int i = 0; i < rows; ++i) {
    const int y = y0 + i;
    for (int lane = 0; lane < kVW; ++lane) {
      float* d = s + int64_t(i) * cols * kVW + lane;
      const int c = c0 + lane;
      if (c >= chans || y < 0 || y >= h) {
        for (int col = 0; col < cols; ++col) d[col * kVW] = 0.f;
        continue;
      }
      const float* r = src + c * cstride + int64_t(y) * w + x0;
      for (int col = 0; col < lo; ++col) d[col * kVW] = 0.f;
      for (int col = lo; col < hi; ++col) d[col * kVW] = r[col];
      for (int col = hi; col < cols; ++col) d[col * kVW] = 0.f;
    }
  }
}

// V for tile row r (tiles lt0.. of the block), channels [c0, c0 + kVW).
void InputRow(const Plan& pl, const float* x, int64_t r, int64_t lt0, int c0,
              float* s) {
  const ConvParams& p = *pl.p;
  const int n = int(r / pl.ty), ty = int(r % pl.ty);
  const int cols = 2 * pl.tx + 2;
  GatherRows(x + int64_t(n) * p.c * p.h * p.w, int64_t(p.h) * p.w, p.h, p.w,
             p.c, c0, 2 * ty - p.pad_t, 4, -p.pad_l, cols, s);
  for (int t = 0; t < pl.tx; ++t) {
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
    float* out = pl.v + (lt0 + t) * pl.ldv + c0;
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i)
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j)
        Store(out + (4 * i + j) * pl.tb * pl.ldv, u[i][j]);
  }
}

// Z for tile row r, output channels [k0, k0 + kVW).
void GradRow(const Plan& pl, const float* dy, int64_t r, int64_t lt0, int k0,
             float* s) {
  const ConvParams& p = *pl.p;
  const int n = int(r / pl.ty), ty = int(r % pl.ty);
  const int cols = 2 * pl.tx;
  GatherRows(dy + int64_t(n) * p.oc * pl.oh * pl.ow, int64_t(pl.oh) * pl.ow,
             pl.oh, pl.ow, p.oc, k0, 2 * ty, 2, 0, cols, s);
  const Vec half = Splat(0.5f);
  for (int t = 0; t < pl.tx; ++t) {
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
    float* out = pl.z + (lt0 + t) * pl.ldz + k0;
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i)
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j)
        Store(out + (4 * i + j) * pl.tb * pl.ldz, z[i][j]);
  }
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

// dw[k][c0 .. c0 + kVW) = A^T M[.][k][c] A, for the channels below C.
void OutputRow(const Plan& pl, int k, int c0, float* dw) {
  const ConvParams& p = *pl.p;
  const int64_t plane = int64_t(pl.kp) * pl.cp;
  const float* src = pl.m + int64_t(k) * pl.cp + c0;
  Vec m[4][4], r[3][4];
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) m[i][j] = Load(src + (4 * i + j) * plane);
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) {
    r[0][j] = m[0][j] + m[1][j] + m[2][j];
    r[1][j] = m[1][j] - m[2][j];
    r[2][j] = m[1][j] + m[2][j] + m[3][j];
  }
  float out[9][kVW];
#pragma GCC unroll 3
  for (int i = 0; i < 3; ++i) {
    Store(out[3 * i], r[i][0] + r[i][1] + r[i][2]);
    Store(out[3 * i + 1], r[i][1] - r[i][2]);
    Store(out[3 * i + 2], r[i][1] + r[i][2] + r[i][3]);
  }
  const int lanes = std::min(kVW, p.c - c0);
  float* d = dw + (int64_t(k) * p.c + c0) * 9;
  for (int lane = 0; lane < lanes; ++lane)
    for (int e = 0; e < 9; ++e) d[lane * 9 + e] = out[e][lane];
}

}  // namespace

void WinogradWeightGradient(const float* x, const float* dy, float* dw,
                            const ConvParams& p) {
  Plan pl;
  pl.p = &p;
  pl.oh = p.oh();
  pl.ow = p.ow();
  pl.tx = (pl.ow + 1) / 2;
  pl.ty = (pl.oh + 1) / 2;
  pl.cp = int(RoundUp(p.c, kNR));
  pl.kp = int(RoundUp(p.oc, kMR));
  pl.kz = int(RoundUp(pl.kp, kVW));
  pl.ldv = OddLines(pl.cp);
  pl.ldz = OddLines(pl.kz);
  // One position's V (tb x ldv floats) within about 256 KiB of L2, and the
  // rows of Z a register tile walks within L1.
  const int64_t target = std::clamp<int64_t>((int64_t(1) << 16) / pl.ldv, 32, 256);
  const int64_t rows = int64_t(p.n) * pl.ty;
  const int64_t rb = std::clamp<int64_t>(target / pl.tx, 1, rows);
  pl.tb = rb * pl.tx;
  const int64_t vsz = kPos * pl.tb * pl.ldv, zsz = kPos * pl.tb * pl.ldz;
  float* buf = Scratch(size_t(vsz + zsz + int64_t(kPos) * pl.kp * pl.cp), 1);
  pl.v = buf;
  pl.z = buf + vsz;
  pl.m = buf + vsz + zsz;

  const int cchunks = pl.cp / kVW, kchunks = pl.kz / kVW;
  const int kpanels = pl.kp / kMR;
  const int scratch = 4 * (2 * pl.tx + 2) * kVW;
  const int64_t macs = int64_t(p.n) * pl.oh * pl.ow * p.oc * p.c * 9;
#ifdef _OPENMP
  const int threads = macs >= kParallelMacs ? omp_get_max_threads() : 1;
#else
  const int threads = 1;
#endif
#pragma omp parallel num_threads(threads) if (threads > 1)
  {
    float* s = Scratch(size_t(scratch), 0);
    for (int64_t r0 = 0; r0 < rows; r0 += rb) {
      const int64_t r1 = std::min(rows, r0 + rb);
      const int64_t per_row = cchunks + kchunks;
      const int64_t items = (r1 - r0) * per_row;
#pragma omp for schedule(dynamic, 4)
      for (int64_t i = 0; i < items; ++i) {
        const int64_t r = r0 + i / per_row, lt0 = (r - r0) * pl.tx;
        const int ch = int(i % per_row);
        if (ch < cchunks)
          InputRow(pl, x, r, lt0, ch * kVW, s);
        else
          GradRow(pl, dy, r, lt0, (ch - cchunks) * kVW, s);
      }
      const int64_t tiles = (r1 - r0) * pl.tx;
      const bool first = r0 == 0;
#pragma omp for schedule(dynamic, 1)
      for (int i = 0; i < kPos * kpanels; ++i) {
        const int pos = i / kpanels, k0 = (i % kpanels) * kMR;
        const float* z = pl.z + pos * pl.tb * pl.ldz + k0;
        const float* v = pl.v + pos * pl.tb * pl.ldv;
        float* m = pl.m + (int64_t(pos) * pl.kp + k0) * pl.cp;
        for (int c0 = 0; c0 < pl.cp; c0 += kNR) {
          if (first)
            Panel<false>(z, pl.ldz, v + c0, pl.ldv, tiles, m + c0, pl.cp);
          else
            Panel<true>(z, pl.ldz, v + c0, pl.ldv, tiles, m + c0, pl.cp);
        }
      }
    }
#pragma omp for schedule(static)
    for (int k = 0; k < p.oc; ++k)
      for (int c0 = 0; c0 < p.c; c0 += kVW) OutputRow(pl, k, c0, dw);
  }
}

}  // namespace SINGA_ISA_NS
}  // namespace cpu
}  // namespace singa
