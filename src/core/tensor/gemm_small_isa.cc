// A float GEMM for the shapes where a BLAS that packs whole operands loses:
// few rows (M = batch size in a linear layer's forward and data gradient)
// or a short reduction (K = batch size in its weight gradient, a rank-k
// update). Compiled once per ISA family (see "One build, every x86 CPU" in
// doc/design.md); tensor_math_cpp.cc decides which shapes come here and
// splits them over threads.
//
// C = alpha * op(A) * op(B) + beta * C, all row-major. The output is cut
// into column panels kNR wide; for each block of kKC reduction steps and
// each panel, row tiles of up to kMR rows run over the block with their
// accumulators in registers, each step broadcasting one value of op(A) per
// row against the panel's row of op(B) (a panel of at most one vector, the
// last of a narrow product, takes tiles one vector wide). op(B) is read in
// place when it is not transposed, the panel is whole and C has few rows
// (under 4 * kMR with A transposed, under kPanelMinM = 96 without);
// otherwise the panel block is first copied into a small zero-padded
// buffer. op(A) is never copied: the tiles read it where it lies, along
// rows or, transposed, along columns.
#include <algorithm>
#include <cstdint>
#include <utility>

#if defined(__AVX2__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "isa_vec.h"

#ifndef SINGA_ISA_NS
#error "gemm_small_isa.cc is compiled per ISA: define SINGA_ISA_NS and SINGA_ISA_LEVEL"
#endif

namespace singa {
namespace cpu {
namespace SINGA_ISA_NS {

namespace {

// Tile shape from the register count: kMR x kNV vectors of accumulators,
// kNV registers for the row of op(B) and one for the broadcast value (16
// vector registers below AVX-512, 32 with it).
constexpr int kNV = 2;
constexpr int kNR = kNV * kVW;
#if SINGA_ISA_LEVEL >= 2
constexpr int kMR = 12;
#else
constexpr int kMR = 6;
#endif
// Reduction steps per block: the panel block (kKC x kNR floats, 16 KiB at
// AVX2 width) stays in L1 while the row tiles sweep it.
constexpr int kKC = 16384 / (kNR * int(sizeof(float)));

inline Vec Splat(float x) { return Vec{} + x; }

// c[i][0:nr] = alpha * sum_p opA(i, p) * bp[p * ldbp + 0:NV * kVW] (+ beta
// * c) for i < MR, p < kc. opA(i, p) is a[i * lda + p], or a[p * lda + i]
// when TA. bp holds NV * kVW readable floats per step (zero beyond the
// panel). With beta == 0, c is not read, so it may hold anything (NaN
// included). NV = 1 serves panels of at most one vector (a 10-class
// output layer), which would leave the second vector's products empty:
// with AVX-512, products with n = 10 (a linear layer's forward and weight
// gradient, 64-500 rows) took 0.55-0.60x the time, 128 x 784 x 16 0.55x;
// with the AVX2 kernels n = 4 and 8 took 0.74-0.80x (Zen 4, one and two
// threads, alternating call by call).
template <int MR, bool TA, int NV>
void Tile(int kc, const float* __restrict a, int64_t lda,
          const float* __restrict bp, int64_t ldbp, float* __restrict c,
          int64_t ldc, int nr, float alpha, float beta) {
  Vec s[MR][NV];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) s[i][v] = Vec{};
  if (TA) {
    for (int p = 0; p < kc; ++p) {
      const float* ap = a + p * lda;
      Vec bv[NV];
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) bv[v] = Load(bp + p * ldbp + v * kVW);
#pragma GCC unroll 16
      for (int i = 0; i < MR; ++i) {
        const Vec av = Splat(ap[i]);
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v) s[i][v] += av * bv[v];
      }
    }
  } else {
    const float* ar[MR];
    for (int i = 0; i < MR; ++i) ar[i] = a + i * lda;
    for (int p = 0; p < kc; ++p) {
      Vec bv[NV];
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) bv[v] = Load(bp + p * ldbp + v * kVW);
#pragma GCC unroll 16
      for (int i = 0; i < MR; ++i) {
        const Vec av = Splat(ar[i][p]);
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v) s[i][v] += av * bv[v];
      }
    }
  }
  if (alpha == 1.f && beta == 0.f && nr == NV * kVW) {
    // The common case, without the scaling multiplies (a rank-k update with
    // a short k spends a good part of its time here).
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) Store(c + i * ldc + v * kVW, s[i][v]);
    return;
  }
  const Vec va = Splat(alpha), vb = Splat(beta);
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i) {
    float* ci = c + i * ldc;
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      const int lanes = std::min(kVW, nr - v * kVW);
      if (lanes <= 0) break;
      Vec r = va * s[i][v];
      if (lanes == kVW) {
        if (beta != 0.f) r += vb * Load(ci + v * kVW);
        Store(ci + v * kVW, r);
      } else {
        if (beta != 0.f) r += vb * LoadFirst(ci + v * kVW, lanes);
        StoreFirst(ci + v * kVW, r, lanes);
      }
    }
  }
}

using TileFn = void (*)(int, const float*, int64_t, const float*, int64_t,
                        float*, int64_t, int, float, float);

template <bool TA, int NV, int... R>
constexpr TileFn PickTile(int mr, std::integer_sequence<int, R...>) {
  TileFn f = nullptr;
  ((f = (mr == R + 1 ? Tile<R + 1, TA, NV> : f)), ...);
  return f;
}

template <bool TA, int NV = kNV>
TileFn TileFor(int mr) {
  return PickTile<TA, NV>(mr, std::make_integer_sequence<int, kMR>{});
}

// Copies rows [p0, p0 + kc) and columns [j0, j0 + nr) of op(B) into buf
// (kNR floats a row, zero beyond nr).
void PackPanel(bool tb, const float* b, int64_t ldb, int64_t p0, int kc,
               int64_t j0, int nr, float* buf) {
  if (tb) {
    for (int p = 0; p < kc; ++p)
      for (int j = nr; j < kNR; ++j) buf[p * kNR + j] = 0.f;
    // op(B)(p, j) = b[j * ldb + p]: read each row of B once, along p.
    for (int j = 0; j < nr; ++j) {
      const float* bj = b + (j0 + j) * ldb + p0;
      for (int p = 0; p < kc; ++p) buf[p * kNR + j] = bj[p];
    }
  } else {
    for (int p = 0; p < kc; ++p) {
      const float* bp = b + (p0 + p) * ldb + j0;
#pragma GCC unroll 4
      for (int v = 0; v < kNV; ++v) {
        const int lanes = std::min(kVW, nr - v * kVW);
        Store(buf + p * kNR + v * kVW, lanes >= kVW  ? Load(bp + v * kVW)
                                       : lanes > 0 ? LoadFirst(bp + v * kVW, lanes)
                                                   : Vec{});
      }
    }
  }
}

// Dot-product tiles for op(A) = A and op(B) = B^T, where both operands run
// along the reduction in memory: c[i][j] = alpha * sum_p a[i * lda + p] *
// b[j * ldb + p] (+ beta * c) for i < MR, j < NR. The products are summed
// lane-wise over the whole reduction and the lanes added once at the end,
// so neither operand is copied.
#if SINGA_ISA_LEVEL >= 2
constexpr int kDotMR = 4, kDotNR = 6;
#else
constexpr int kDotMR = 4, kDotNR = 3;
#endif

inline float HSum(Vec v) {
  float s = 0.f;
#pragma GCC unroll 16
  for (int l = 0; l < kVW; ++l) s += v[l];
  return s;
}

template <int MR, int NR>
void DotTile(int64_t k, const float* __restrict a, int64_t lda,
             const float* __restrict b, int64_t ldb, float* __restrict c,
             int64_t ldc, float alpha, float beta) {
  Vec s[MR][NR];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 8
    for (int j = 0; j < NR; ++j) s[i][j] = Vec{};
  const int64_t kv = k / kVW * kVW;
  for (int64_t p = 0; p < kv; p += kVW) {
    Vec av[MR];
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) av[i] = Load(a + i * lda + p);
#pragma GCC unroll 8
    for (int j = 0; j < NR; ++j) {
      const Vec bv = Load(b + j * ldb + p);
#pragma GCC unroll 8
      for (int i = 0; i < MR; ++i) s[i][j] += av[i] * bv;
    }
  }
  if (kv < k) {
    const int lanes = int(k - kv);
    Vec av[MR];
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) av[i] = LoadFirst(a + i * lda + kv, lanes);
#pragma GCC unroll 8
    for (int j = 0; j < NR; ++j) {
      const Vec bv = LoadFirst(b + j * ldb + kv, lanes);
#pragma GCC unroll 8
      for (int i = 0; i < MR; ++i) s[i][j] += av[i] * bv;
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 8
    for (int j = 0; j < NR; ++j) {
      float& cij = c[i * ldc + j];
      const float t = alpha * HSum(s[i][j]);
      cij = beta == 0.f ? t : t + beta * cij;
    }
}

using DotFn = void (*)(int64_t, const float*, int64_t, const float*, int64_t,
                       float*, int64_t, float, float);

template <int MR, int... J>
constexpr DotFn PickDotCols(int nr, std::integer_sequence<int, J...>) {
  DotFn f = nullptr;
  ((f = (nr == J + 1 ? DotTile<MR, J + 1> : f)), ...);
  return f;
}

template <int... I>
constexpr DotFn PickDot(int mr, int nr, std::integer_sequence<int, I...>) {
  DotFn f = nullptr;
  ((f = (mr == I + 1 ? PickDotCols<I + 1>(nr, std::make_integer_sequence<int, kDotNR>{})
                     : f)),
   ...);
  return f;
}

DotFn DotFor(int mr, int nr) {
  return PickDot(mr, nr, std::make_integer_sequence<int, kDotMR>{});
}

// C = alpha * A * B^T + beta * C by dot-product tiles: column blocks of
// kDotNR rows of B outside, so that they stay in L1 while every row block
// of A passes over them.
void DotGemm(int64_t m, int64_t n, int64_t k, float alpha, const float* a,
             int64_t lda, const float* b, int64_t ldb, float beta, float* c,
             int64_t ldc) {
  for (int64_t j0 = 0; j0 < n; j0 += kDotNR) {
    const int nr = int(std::min<int64_t>(kDotNR, n - j0));
    const DotFn full = DotFor(kDotMR, nr);
    for (int64_t i0 = 0; i0 < m; i0 += kDotMR) {
      const int mr = int(std::min<int64_t>(kDotMR, m - i0));
      const DotFn f = mr == kDotMR ? full : DotFor(mr, nr);
      f(k, a + i0 * lda, lda, b + j0 * ldb, ldb, c + i0 * ldc + j0, ldc, alpha, beta);
    }
  }
}

// Below this reduction length the dot-product tiles spend more on adding
// lanes than on products, and A * B^T goes through a packed panel instead.
constexpr int64_t kDotMinK = 4 * kVW;
// From kPanelMinM rows, enough row tiles share a packed panel of B to pay
// for its copy (B is packed from there whatever the transposes), and up
// to a reduction of 512 the panel also beats the dot tiles for A * B^T
// (m = 128-256, k = 256-512, n = 256-784: 0.80-1.0x their time on one and
// two threads; at k = 800 the two were even, 0.88-1.11x; AVX2 Zen 4).
constexpr int64_t kPanelMinM = 96, kPanelMaxK = 512;

}  // namespace

int SmallGemmPanel() { return kNR; }

void SmallGemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
               const float* a, int64_t lda, const float* b, int64_t ldb,
               float beta, float* c, int64_t ldc) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0 || alpha == 0.f) {
    // No products: C = beta * C (C is not read when beta is 0).
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j)
        c[i * ldc + j] = beta == 0.f ? 0.f : beta * c[i * ldc + j];
    return;
  }
  if (!ta && tb && k >= kDotMinK && (m < kPanelMinM || k > kPanelMaxK)) {
    DotGemm(m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  alignas(64) float buf[kKC * kNR];
  // Tiles of kNV vectors, and of one for panels of at most one vector.
  auto tile_for = [ta](int rows, bool one) -> TileFn {
    if (rows == 0) return nullptr;
    if (one) return ta ? TileFor<true, 1>(rows) : TileFor<false, 1>(rows);
    return ta ? TileFor<true>(rows) : TileFor<false>(rows);
  };
  // Rows past the last whole tile. A tile of fewer than half kMR rows has
  // too few independent sums to hide the FMA latency, so such a remainder
  // shares the last whole tile's rows instead: two tiles of about
  // (kMR + rest) / 2 rows each (rows 128 = 20 x 6 + 4 + 4 at AVX2).
  const int rest = int(m % kMR);
  const bool split = rest > 0 && 2 * rest < kMR && m > kMR;
  const int64_t whole_end = split ? m - kMR - rest : m - rest;
  const int tail1 = split ? (kMR + rest + 1) / 2 : rest;
  const int tail2 = split ? kMR + rest - tail1 : 0;
  const TileFn tiles[2][3] = {
      {tile_for(kMR, false), tile_for(tail1, false), tile_for(tail2, false)},
      {tile_for(kMR, true), tile_for(tail1, true), tile_for(tail2, true)}};
  // Reduction blocks outside: the rows of op(A) in a block (m x kKC) stay in
  // L2 while every column panel passes.
  // Blocks of equal length (784 = 4 x 196, not 3 x 256 + 16): a short last
  // block would load and store all of C for a few products.
  const int64_t blocks = (k + kKC - 1) / kKC, kb = (k + blocks - 1) / blocks;
  for (int64_t p0 = 0; p0 < k; p0 += kb) {
    const int kc = int(std::min<int64_t>(kb, k - p0));
    // Later blocks add to what the first one stored.
    const float bt = p0 == 0 ? beta : 1.f;
    for (int64_t j0 = 0; j0 < n; j0 += kNR) {
      const int nr = int(std::min<int64_t>(kNR, n - j0));
      const float* bp = b + p0 * ldb + j0;
      int64_t ldbp = ldb;
      // With A transposed, a tile reads a new line of A at every step as
      // well, and a panel read in place (rows ldb floats apart, 1 KiB in a
      // 256-wide layer) then no longer stays in L1: packing it made A^T * B
      // up to 1.3x faster from a few tiles of rows, and never slower
      // (AVX2, k = 16-128). Without the transpose the panel pays from about
      // 96 rows: 0.92-0.94x the time for 128 x 784 x 256 and 128 x 256 x
      // 256 while the host is slow to serve L2 (1.00x when it is not, and
      // 1.08-1.3x at 8-32 rows, where the copy is not spread over enough
      // tiles; AVX2 Zen 4, 1 and 2 threads, alternating in one process).
      if (tb || nr < kNR || m >= (ta ? 4 * kMR : kPanelMinM)) {
        PackPanel(tb, b, ldb, p0, kc, j0, nr, buf);
        bp = buf;
        ldbp = kNR;
      }
      auto run = [&](TileFn f, int64_t i0) {
        const float* ai = ta ? a + p0 * lda + i0 : a + i0 * lda + p0;
        f(kc, ai, lda, bp, ldbp, c + i0 * ldc + j0, ldc, nr, alpha, bt);
      };
      const TileFn* t = tiles[nr <= kVW];
      for (int64_t i0 = 0; i0 < whole_end; i0 += kMR) run(t[0], i0);
      if (tail1) run(t[1], whole_end);
      if (tail2) run(t[2], whole_end + tail1);
    }
  }
}

}  // namespace SINGA_ISA_NS
}  // namespace cpu
}  // namespace singa
