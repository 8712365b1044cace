// Convolution micro-kernels and packing for one ISA family.
//
// CMakeLists.txt compiles this file once per family with that family's
// flags, SINGA_ISA_NS naming its namespace and SINGA_ISA_LEVEL its vector
// width: 4 floats (baseline SSE2), 8 (AVX2 + FMA) or 16 (AVX-512). The code
// is written once with GCC vector extensions, so the families differ only in
// kVW and the register-tile shapes below, which follow from the register
// count (16 vector registers below AVX-512, 32 with it). The matrices and
// the tap addressing are described in conv_engine.h.
#include <algorithm>
#include <cstring>

#if defined(__AVX2__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "conv_engine.h"
#include "isa_vec.h"

#ifndef SINGA_ISA_NS
#error "conv_isa.cc is compiled per ISA: define SINGA_ISA_NS and SINGA_ISA_LEVEL"
#endif

namespace singa {
namespace cpu {
namespace SINGA_ISA_NS {

namespace {

inline Vec Splat(float x) { return Vec{} + x; }
// Lanes [lo, hi) of the vector at p, zero elsewhere; lanes outside [lo, hi)
// are not read, so p + lane may lie outside the buffer there (the zero
// padding of a window). StorePart writes lanes [0, n) only.
#if SINGA_ISA_LEVEL >= 2 && defined(__AVX512F__)
inline __mmask16 LaneMask(int lo, int hi) {
  lo = std::clamp(lo, 0, 16);
  hi = std::clamp(hi, 0, 16);
  const unsigned below_hi = hi == 16 ? 0xffffu : (1u << hi) - 1u;
  const unsigned below_lo = lo == 16 ? 0xffffu : (1u << lo) - 1u;
  return __mmask16(below_hi & ~below_lo);
}
inline Vec LoadPart(const float* p, int lo, int hi) {
  return Vec(_mm512_maskz_loadu_ps(LaneMask(lo, hi), p));
}
inline void StorePart(float* p, Vec v, int n) {
  _mm512_mask_storeu_ps(p, LaneMask(0, n), __m512(v));
}
#elif SINGA_ISA_LEVEL == 1 && defined(__AVX2__)
inline __m256i LaneMask(int lo, int hi) {
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_and_si256(_mm256_cmpgt_epi32(lane, _mm256_set1_epi32(lo - 1)),
                          _mm256_cmpgt_epi32(_mm256_set1_epi32(hi), lane));
}
inline Vec LoadPart(const float* p, int lo, int hi) {
  return Vec(_mm256_maskload_ps(p, LaneMask(lo, hi)));
}
inline void StorePart(float* p, Vec v, int n) {
  _mm256_maskstore_ps(p, LaneMask(0, n), __m256(v));
}
#else
inline Vec LoadPart(const float* p, int lo, int hi) {
  Vec v{};
  for (int l = std::max(lo, 0); l < std::min(hi, kVW); ++l) v[l] = p[l];
  return v;
}
inline void StorePart(float* p, Vec v, int n) {
  for (int l = 0; l < std::min(n, kVW); ++l) p[l] = v[l];
}
#endif

inline float HSum(Vec v) {
  float s = 0.f;
  for (int l = 0; l < kVW; ++l) s += v[l];
  return s;
}

// ----------------------------------------------------------- tile shapes
// NN: MR rows x kNnVecs vectors of accumulators, one vector register per B
// vector and one for the broadcast A value. NT: MR x NR dot products, plus
// MR registers holding the A vectors and one for the B vector.
constexpr int kNnVecs = 2;
constexpr int kNnCols = kNnVecs * kVW;
// Row counts to choose from, best first, with their speed relative to the
// first (fewer rows give fewer multiply-adds per load), measured on AVX2
// (Zen 4) and assumed alike for the other widths.
#if SINGA_ISA_LEVEL >= 2
constexpr int kNnRowChoices[] = {12, 10, 8};
constexpr int kNtRows = 4, kNtCols = 6;
#else
constexpr int kNnRowChoices[] = {6, 5, 4};
constexpr int kNtRows = 3, kNtCols = 4;
#endif
constexpr float kNnRowSpeed[] = {1.f, 0.95f, 0.92f};

// ---------------------------------------------------------- micro-kernels

// Vector v of output row i of a tile is kVW floats at dst[i * kNnVecs + v]:
// consecutive in a plain output, anywhere when the tile adds into dx through
// the windows.
//
// dst[i][v] (+)= sum_k a[i * lda + k] * b[k * kNnCols + v * kVW + 0:kVW] for
// i < mr. Rows mr..MR-1 repeat row mr-1 (valid memory) and are dropped.
// Without `accumulate`, the sums start from bias[i] (or zero).
template <int MR>
void KernelNN(int kc, const float* __restrict a, int64_t lda, int mr,
              const float* __restrict b, float* const* dst, const float* bias,
              bool accumulate) {
  const float* ar[MR];
  for (int i = 0; i < MR; ++i) ar[i] = a + int64_t(i < mr ? i : mr - 1) * lda;
  Vec s[MR][kNnVecs];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i) {
    const int r = i < mr ? i : mr - 1;
#pragma GCC unroll 4
    for (int v = 0; v < kNnVecs; ++v)
      s[i][v] = accumulate ? Load(dst[r * kNnVecs + v])
                           : Splat(bias ? bias[r] : 0.f);
  }
  for (int k = 0; k < kc; ++k) {
    Vec bv[kNnVecs];
#pragma GCC unroll 4
    for (int v = 0; v < kNnVecs; ++v) bv[v] = Load(b + k * kNnCols + v * kVW);
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      const Vec av = Splat(ar[i][k]);
#pragma GCC unroll 4
      for (int v = 0; v < kNnVecs; ++v) s[i][v] += av * bv[v];
    }
  }
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i) {
    if (i >= mr) break;
#pragma GCC unroll 4
    for (int v = 0; v < kNnVecs; ++v) Store(dst[i * kNnVecs + v], s[i][v]);
  }
}

using NnKernel = void (*)(int, const float*, int64_t, int, const float*,
                          float* const*, const float*, bool);

// The destination table of rows [0, mr) of a tile stored at c, ldc apart.
inline void RowTargets(float* c, int64_t ldc, int mr, float** dst) {
  for (int i = 0; i < mr; ++i)
    for (int v = 0; v < kNnVecs; ++v) dst[i * kNnVecs + v] = c + i * ldc + v * kVW;
}

NnKernel NnKernelFor(int mr) {
  switch (mr) {
#if SINGA_ISA_LEVEL >= 2
    case 12: return KernelNN<12>;
    case 10: return KernelNN<10>;
    default: return KernelNN<8>;
#else
    case 6: return KernelNN<6>;
    case 5: return KernelNN<5>;
    default: return KernelNN<4>;
#endif
  }
}

// acc[i][j] += a[i * lda + 0:len] * b[j * ldb + 0:len] lane by lane, for the
// kNtRows x kNtCols tile; len is a multiple of kVW. The lanes are summed
// once, after the whole reduction (NtBlock), not per call.
void KernelNT(int len, const float* __restrict a, int64_t lda, int mr,
              const float* __restrict b, int64_t ldb, Vec* __restrict acc) {
  // Rows mr..kNtRows-1 repeat row mr-1 (valid memory); their sums are never
  // read.
  const float* ar[kNtRows];
  for (int i = 0; i < kNtRows; ++i) ar[i] = a + int64_t(i < mr ? i : mr - 1) * lda;
  Vec s[kNtRows][kNtCols];
#pragma GCC unroll 8
  for (int i = 0; i < kNtRows; ++i)
#pragma GCC unroll 8
    for (int j = 0; j < kNtCols; ++j) s[i][j] = acc[i * kNtCols + j];
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

// ---------------------------------------------------------------- packing

typedef float Vec4 __attribute__((vector_size(4 * sizeof(float))));

// Short runs are the rule here (a feature-map row is often 4-32 floats), so
// tails are done with one more vector overlapping the last full one rather
// than a scalar loop.
inline __attribute__((always_inline)) void Zero(float* d, int n) {
  if (n >= kVW) {
    for (int i = 0; i + kVW <= n; i += kVW) Store(d + i, Vec{});
    Store(d + n - kVW, Vec{});
  } else if (kVW > 4 && n >= 4) {
    const Vec4 z{};
    for (int i = 0; i + 4 <= n; i += 4) std::memcpy(d + i, &z, sizeof z);
    std::memcpy(d + n - 4, &z, sizeof z);
  } else {
    for (int i = 0; i < n; ++i) d[i] = 0.f;
  }
}

// d[0:n] = s[0:n]; d and s must not overlap.
inline __attribute__((always_inline)) void Copy(float* __restrict d, const float* __restrict s, int n) {
  if (n >= kVW) {
    for (int i = 0; i + kVW <= n; i += kVW) Store(d + i, Load(s + i));
    Store(d + n - kVW, Load(s + n - kVW));
  } else if (kVW > 4 && n >= 4) {
    Vec4 a;
    for (int i = 0; i + 4 <= n; i += 4) {
      std::memcpy(&a, s + i, sizeof a);
      std::memcpy(d + i, &a, sizeof a);
    }
    std::memcpy(&a, s + n - 4, sizeof a);
    std::memcpy(d + n - 4, &a, sizeof a);
  } else {
    for (int i = 0; i < n; ++i) d[i] = s[i];
  }
}

// d[j] = s[2 * j] for j < n; reads s[0 : 2 * n - 1] and, for whole vectors,
// one float past it, so the caller keeps s[2 * n - 1] readable.
void CopyEven(float* __restrict d, const float* __restrict s, int n) {
  IVec even;
  for (int l = 0; l < kVW; ++l) even[l] = 2 * l;
  int j = 0;
  for (; j + kVW <= n; j += kVW) {
    const Vec v = __builtin_shuffle(Load(s + 2 * j), Load(s + 2 * j + kVW), even);
    Store(d + j, v);
  }
  for (; j < n; ++j) d[j] = s[2 * j];
}

// A grow-only array. Standard containers of int would be instantiated here
// and in other objects alike, and the linker could hand this family's copy
// to code running on a CPU without it (see cmake/CheckIsaSymbols.cmake).
template <typename T>
class Buffer {
 public:
  Buffer() = default;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { delete[] data_; }
  T* Reserve(size_t n) {
    if (n > cap_) {
      delete[] data_;
      data_ = new T[n];
      cap_ = n;
    }
    return data_;
  }
  T* data() const { return data_; }

 private:
  T* data_ = nullptr;
  size_t cap_ = 0;
};

// A piece of one grid row: `len` pixels from (b, qy, qx), landing at packed
// column `col`.
struct Run {
  int b, qy, qx, len, col;
};

struct Runs {
  Buffer<Run> buf;
  int count = 0;
  const Run* begin() const { return buf.data(); }
  const Run* end() const { return buf.data() + count; }
};

// Splits grid pixels [q0, q1) into runs along grid rows, and also at every
// multiple of `split` packed columns when split > 0.
void BuildRuns(const Grid& g, int64_t q0, int64_t q1, int split, Runs* runs) {
  // At most one run per grid row touched plus one per split boundary.
  const int64_t n = q1 - q0;
  Run* out = runs->buf.Reserve(size_t(n / g.gw + 2 + (split > 0 ? n / split + 1 : 0)));
  const int64_t plane = int64_t(g.gh) * g.gw;
  int col = 0, count = 0;
  for (int64_t q = q0; q < q1;) {
    const int b = int(q / plane);
    const int64_t rem = q - b * plane;
    const int qy = int(rem / g.gw), qx = int(rem - int64_t(qy) * g.gw);
    int len = int(std::min<int64_t>(g.gw - qx, q1 - q));
    if (split > 0) len = std::min(len, split - col % split);
    out[count++] = Run{b, qy, qx, len, col};
    q += len;
    col += len;
  }
  runs->count = count;
}

// dst[0:len] = src[x0 + j * ssx] for j < len, zero where x0 + j * ssx is
// outside [0, sw).
inline void FillRow(float* __restrict dst, const float* __restrict src, int x0,
                    int ssx, int len, int sw) {
  if (ssx == 1) {
    if (x0 >= 0 && x0 + len <= sw) {
      if (len == kNnCols) {
#pragma GCC unroll 4
        for (int v = 0; v < kNnVecs; ++v)
          Store(dst + v * kVW, Load(src + x0 + v * kVW));
        return;
      }
      return Copy(dst, src + x0, len);
    }
    // Part of the run is padding: vectors with the outside lanes masked off.
    const int lo = std::max(0, -x0), hi = std::min(len, sw - x0);
    for (int j = 0; j < len; j += kVW) {
      const Vec v = LoadPart(src + x0 + j, lo - j, hi - j);
      if (j + kVW <= len)
        Store(dst + j, v);
      else
        StorePart(dst + j, v, len - j);
    }
    return;
  }
  // x0 + j * ssx in [0, sw) for j in [lo, hi).
  const int lo = x0 >= 0 ? 0 : std::min(len, (-x0 + ssx - 1) / ssx);
  const int hi = x0 >= sw ? lo
                          : std::max(lo, std::min(len, (sw - 1 - x0) / ssx + 1));
  for (int j = 0; j < lo; ++j) dst[j] = 0.f;
  if (ssx == 2 && hi > lo) {
    // CopyEven reads one float past the last taken, so leave the final
    // element to the scalar loop when it ends the row.
    const int last = x0 + 2 * (hi - 1) + 1 < sw ? hi : hi - 1;
    CopyEven(dst + lo, src + x0 + 2 * lo, last - lo);
    if (last < hi) dst[hi - 1] = src[x0 + 2 * (hi - 1)];
  } else {
    for (int j = lo; j < hi; ++j) dst[j] = src[x0 + j * ssx];
  }
  for (int j = hi; j < len; ++j) dst[j] = 0.f;
}

// dst[x0 + j * ssx] += src[j] for j < len where x0 + j * ssx is in [0, sw).
inline void AddRow(float* __restrict dst, const float* __restrict src, int x0,
                   int ssx, int len, int sw) {
  if (ssx == 1) {
    const int lo = std::max(0, -x0), hi = std::min(len, sw - x0);
    float* d = dst + x0;
    for (int j = 0; j < len; j += kVW) {
      if (j >= lo && j + kVW <= hi) {
        Store(d + j, Load(d + j) + Load(src + j));
      } else if (j < hi && j + kVW > lo) {
        // The chunk's lanes inside the row, [a, e), shifted to lane 0.
        const int a = std::max(lo, j), e = std::min(hi, j + kVW);
        const Vec v = LoadPart(d + a, 0, e - a) + LoadPart(src + a, 0, e - a);
        StorePart(d + a, v, e - a);
      }
    }
    return;
  }
  for (int j = 0; j < len; ++j) {
    const int x = x0 + j * ssx;
    if (x >= 0 && x < sw) dst[x] += src[j];
  }
}

// Row k = (c * tr + i) * tc + j of t as its (c, i, j), so that walking rows
// needs no division.
struct TapCursor {
  int c, i, j;
  TapCursor(const TapRows& t, int k)
      : c(k / (t.tr * t.tc)), i(k / t.tc % t.tr), j(k % t.tc) {}
};

// Rows [k0, k0 + kc) of t (k0 given as the cursor `at`) over the pixels of
// `runs`: row k0 + k of run r goes to dst + k * kstride + RunOffset(r), len
// floats. Taps sharing a source row (one channel and kernel row) are done
// together, channel by channel over all runs, so the source is swept in
// order rather than jumping between channels for every run.
template <typename RunOffset>
void PackRows(const TapRows& t, const Run* runs, int nruns, TapCursor at,
              int kc, float* dst, int64_t kstride, RunOffset run_offset) {
  int c = at.c, i = at.i, j = at.j;
  for (int k = 0; k < kc;) {
    const int n = std::min(t.tc - j, kc - k);
    const int* ox = t.offx + j;
    // Tap offsets are monotonic, so the ends bound them all.
    const int lo = std::min(ox[0], ox[n - 1]), hi = std::max(ox[0], ox[n - 1]);
    const float* chan = t.src + c * t.cstride;
    // Rows of a stride-2 grid are read every other one, which the hardware
    // prefetchers follow poorly; at stride 1 they stream in order.
    const bool prefetch = t.ssy > 1 && c + 1 < t.channels;
    for (int u = 0; u < nruns; ++u) {
      const Run& r = runs[u];
      float* d = dst + k * kstride + run_offset(r);
      const int y = r.qy * t.ssy + t.offy[i];
      if (y < 0 || y >= t.sh) {
        for (int v = 0; v < n; ++v) Zero(d + v * kstride, r.len);
        continue;
      }
      const float* row = chan + r.b * t.img_stride + int64_t(y) * t.sw;
      const int xbase = r.qx * t.ssx;
      if (prefetch) {
        // The same piece of the next channel, read one channel's worth of
        // runs from now.
        const float* next = row + t.cstride + xbase + lo;
        const uintptr_t end = uintptr_t(next + hi - lo + (r.len - 1) * t.ssx);
        for (uintptr_t a = uintptr_t(next) & ~uintptr_t(63); a <= end; a += 64)
          __builtin_prefetch(reinterpret_cast<const void*>(a));
      }
      if (t.ssx == 1 && xbase + lo >= 0 && xbase + hi + r.len <= t.sw) {
        // The common case: the run lies inside the image for every tap.
        const float* s0 = row + xbase;
        if (r.len == kNnCols) {
          for (int v = 0; v < n; ++v) {
            const float* sv = s0 + ox[v];
            float* o = d + v * kstride;
#pragma GCC unroll 4
            for (int w = 0; w < kNnVecs; ++w)
              Store(o + w * kVW, Load(sv + w * kVW));
          }
        } else if (r.len == kVW) {
          for (int v = 0; v < n; ++v) Store(d + v * kstride, Load(s0 + ox[v]));
        } else {
          for (int v = 0; v < n; ++v) Copy(d + v * kstride, s0 + ox[v], r.len);
        }
      } else if (t.ssx == 2 && xbase + lo >= 0 &&
                 xbase + hi + 2 * r.len <= t.sw) {
        // Stride 2 inside the image (CopyEven reads one float past the
        // last it takes, still inside the row).
        const float* s0 = row + xbase;
        for (int v = 0; v < n; ++v) CopyEven(d + v * kstride, s0 + ox[v], r.len);
      } else {
        for (int v = 0; v < n; ++v)
          FillRow(d + v * kstride, row, xbase + ox[v], t.ssx, r.len, t.sw);
      }
    }
    k += n;
    j = 0;
    if (++i == t.tr) {
      i = 0;
      ++c;
    }
  }
}

// Adds rows [m0, m0 + mr) of a micro-tile (`tile`, kNnCols floats per row)
// into the output through the taps of s, for the runs `runs` of the tile's
// columns (starting at tile column `col0`).
// Channel-fastest row numbering lets a tile's rows go to different
// channels: with taps fastest, consecutive rows add to overlapping pieces of
// one output row, and each load would wait for the store just before it.
// Channel offset and tap of each row [m0, m0 + mr) of s.
void RowTaps(const TapRows& s, int m0, int mr, int64_t* coff, int* oy,
             int* ox) {
  if (s.channel_fastest) {
    int c = m0 % s.channels, t = m0 / s.channels;
    for (int row = 0; row < mr; ++row) {
      coff[row] = c * s.cstride;
      oy[row] = s.offy[t / s.tc];
      ox[row] = s.offx[t % s.tc];
      if (++c == s.channels) {
        c = 0;
        ++t;
      }
    }
  } else {
    TapCursor at(s, m0);
    for (int row = 0; row < mr; ++row) {
      coff[row] = at.c * s.cstride;
      oy[row] = s.offy[at.i];
      ox[row] = s.offx[at.j];
      if (++at.j == s.tc) {
        at.j = 0;
        if (++at.i == s.tr) {
          at.i = 0;
          ++at.c;
        }
      }
    }
  }
}

struct TileTaps {
  int64_t coff[kNnRowChoices[0]];
  int oy[kNnRowChoices[0]], ox[kNnRowChoices[0]];
};

void ScatterTile(const TapRows& s, float* out, const TileTaps& tt, int mr,
                 const float* tile, const Run* runs, int nruns, int col0) {
  const int64_t* coff = tt.coff;
  const int *oy = tt.oy, *ox = tt.ox;
  for (int u = 0; u < nruns; ++u) {
    const Run& r = runs[u];
    float* img = out + r.b * s.img_stride;
    const int ybase = r.qy * s.ssy, xbase = r.qx * s.ssx;
    for (int row = 0; row < mr; ++row) {
      const int y = ybase + oy[row];
      if (y >= 0 && y < s.sh)
        AddRow(img + coff[row] + int64_t(y) * s.sw,
               tile + row * kNnCols + (r.col - col0), xbase + ox[row], s.ssx,
               r.len, s.sw);
    }
  }
}

// Where rows [m0, m0 + mr) of a tile add into the output through the taps
// of s, when every vector of every row lands on kVW consecutive outputs
// inside the image: the kernel then adds in place (dst, see KernelNN) and
// no scatter pass is needed. False (and dst unusable) otherwise.
bool ScatterTargets(const TapRows& s, float* out, const TileTaps& tt, int mr,
                    const Run* runs, int nruns, int col0, float** dst) {
  // The kernel loads all its targets before storing any, so they must not
  // overlap: rows of a tile must be different channels (channel-fastest
  // numbering with at least mr channels). Rows numbered taps-fastest would
  // also overlap the previous tile's outputs, and loading them right after
  // its stores would stall; ScatterTile's separate adds do not.
  if (s.ssx != 1 || !s.channel_fastest || s.channels < mr) return false;
  const int64_t* coff = tt.coff;
  const int *oy = tt.oy, *ox = tt.ox;
  for (int v = 0; v < kNnVecs; ++v) {
    const int c = col0 + v * kVW;
    int u = 0;
    while (u < nruns && runs[u].col + runs[u].len <= c) ++u;
    if (u == nruns || runs[u].col > c || c + kVW > runs[u].col + runs[u].len)
      return false;
    const Run& r = runs[u];
    float* img = out + r.b * s.img_stride;
    const int xbase = r.qx + (c - r.col);
    for (int row = 0; row < mr; ++row) {
      const int y = r.qy * s.ssy + oy[row], x = xbase + ox[row];
      if (y < 0 || y >= s.sh || x < 0 || x + kVW > s.sw) return false;
      dst[row * kNnVecs + v] = img + coff[row] + int64_t(y) * s.sw + x;
    }
  }
  return true;
}

// Stores v at p (aligned to a vector) bypassing the caches where the ISA
// can: dx of a stride-2 product is written once and read only later.
inline void StreamStore(float* p, Vec v) {
#if SINGA_ISA_LEVEL >= 2 && defined(__AVX512F__)
  _mm512_stream_ps(p, __m512(v));
#elif SINGA_ISA_LEVEL == 1 && defined(__AVX2__)
  _mm256_stream_ps(p, __m256(v));
#else
  Store(p, v);
#endif
}

// Rows [0, mr) of a tile (kNnCols floats per row at temp, its columns
// starting at c0) written to a stride-2 output (NnJob::gap_w): each run's
// values go to every other float, with zeros in between.
void WriteWithGaps(const NnJob& job, float* out_m, const float* temp, int mr,
                   const Run* runs, int nruns, int64_t c0,
                   const int64_t* colofs) {
  IVec lo, hi;
  for (int l = 0; l < kVW; ++l) {
    lo[l] = l % 2 ? kVW : l / 2;
    hi[l] = l % 2 ? kVW : kVW / 2 + l / 2;
  }
  for (int u = 0; u < nruns; ++u) {
    const Run& r = runs[u];
    // Pixels whose following float is still in the row.
    const int gapped =
        2 * (r.qx + r.len - 1) + 1 < job.gap_w ? r.len : r.len - 1;
    for (int i = 0; i < mr; ++i) {
      const float* t = temp + i * kNnCols + (r.col - c0);
      float* d = out_m + int64_t(i) * job.out_ch + colofs[r.col];
      int j = 0;
      const bool aligned = reinterpret_cast<uintptr_t>(d) % sizeof(Vec) == 0;
      for (; j + kVW <= gapped; j += kVW) {
        const Vec v = Load(t + j);
        const Vec a = __builtin_shuffle(v, Vec{}, lo);
        const Vec b = __builtin_shuffle(v, Vec{}, hi);
        if (aligned) {
          StreamStore(d + 2 * j, a);
          StreamStore(d + 2 * j + kVW, b);
        } else {
          Store(d + 2 * j, a);
          Store(d + 2 * j + kVW, b);
        }
      }
      for (; j < r.len; ++j) {
        d[2 * j] = t[j];
        if (j < gapped) d[2 * j + 1] = 0.f;
      }
    }
  }
}

int64_t RoundUp(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

struct NnScratch {
  Runs runs;
  Buffer<int> panel_run;    // first run of each panel, then the run count
  Buffer<int64_t> colofs;   // output offset (channel 0) of each column
};

NnScratch& NnLocal() {
  thread_local NnScratch s;
  return s;
}

}  // namespace

// ---------------------------------------------------------------------- NN

int NnColsPerTile() { return kNnCols; }

// The row count that computes M rows (padded up to whole tiles) fastest.
int NnRowsPerTile(int M) {
  int best = kNnRowChoices[0];
  float best_cost = 1e30f;
  for (int i = 0; i < 3; ++i) {
    const float cost = float(RoundUp(M, kNnRowChoices[i])) / kNnRowSpeed[i];
    if (cost < best_cost) {
      best = kNnRowChoices[i];
      best_cost = cost;
    }
  }
  return best;
}

size_t NnWorkFloats(const NnJob& job, int64_t cols) {
  const int64_t panels = (cols + kNnCols - 1) / kNnCols;
  return size_t(RoundUp(panels * job.kc * kNnCols, 16)) +
         size_t(kNnRowChoices[0]) * kNnCols;
}

void NnSlab(const NnJob& job, int64_t q0, int64_t q1, int m0, int m1,
            float* work) {
  const int MR = NnRowsPerTile(job.M);
  const NnKernel kernel = NnKernelFor(MR);
  const int K = job.b.rows();
  const int64_t ncols = q1 - q0;
  const int panels = int((ncols + kNnCols - 1) / kNnCols);
  float* pack = work;
  float* temp = work + RoundUp(int64_t(panels) * job.kc * kNnCols, 16);

  NnScratch& sc = NnLocal();
  BuildRuns(job.grid, q0, q1, kNnCols, &sc.runs);
  const Run* runs = sc.runs.begin();
  int* panel_run = sc.panel_run.Reserve(size_t(panels) + 1);
  panel_run[panels] = sc.runs.count;
  for (int u = sc.runs.count - 1; u >= 0; --u)
    panel_run[runs[u].col / kNnCols] = u;
  int64_t* colofs = sc.colofs.Reserve(size_t(ncols));
  for (const Run& r : sc.runs)
    for (int j = 0; j < r.len; ++j)
      colofs[r.col + j] = r.b * job.out_img + job.obase +
                          int64_t(r.qy) * job.osy + int64_t(r.qx + j) * job.osx;
  // A panel is written in place when its columns are consecutive in the
  // output; otherwise through `temp` and a scatter.
  const bool dense = job.dense();
  auto in_place = [&](int p) {
    const int64_t c0 = int64_t(p) * kNnCols;
    return dense && c0 + kNnCols <= ncols &&
           colofs[c0 + kNnCols - 1] - colofs[c0] == kNnCols - 1;
  };

  for (int k0 = 0; k0 < K; k0 += job.kc) {
    const int kc = std::min(job.kc, K - k0);
    PackRows(job.b, runs, sc.runs.count, TapCursor(job.b, k0), kc, pack,
             kNnCols, [kc](const Run& r) {
               return int64_t(r.col / kNnCols) * kc * kNnCols + r.col % kNnCols;
             });
    if (ncols % kNnCols) {
      const int used = int(ncols % kNnCols);
      float* last = pack + int64_t(panels - 1) * kc * kNnCols;
      for (int k = 0; k < kc; ++k)
        Zero(last + int64_t(k) * kNnCols + used, kNnCols - used);
    }
    const bool first = k0 == 0;
    for (int m = m0; m < m1; m += MR) {
      const int mr = std::min(MR, m1 - m);
      const float* a = job.a + int64_t(m) * job.lda + k0;
      const float* bias = first && job.bias ? job.bias + m : nullptr;
      float* out_m = job.out + int64_t(m) * job.out_ch;
      TileTaps taps;
      if (job.scatter) RowTaps(*job.scatter, m, mr, taps.coff, taps.oy, taps.ox);
      for (int p = 0; p < panels; ++p) {
        const float* bp = pack + int64_t(p) * kc * kNnCols;
        const int64_t c0 = int64_t(p) * kNnCols;
        float* dst[kNnRowChoices[0] * kNnVecs];
        if (job.scatter) {
          const Run* pr = runs + panel_run[p];
          const int nr = panel_run[p + 1] - panel_run[p];
          if (ScatterTargets(*job.scatter, job.out, taps, mr, pr, nr, int(c0), dst)) {
            kernel(kc, a, job.lda, mr, bp, dst, nullptr, true);
          } else {
            RowTargets(temp, kNnCols, mr, dst);
            kernel(kc, a, job.lda, mr, bp, dst, nullptr, false);
            ScatterTile(*job.scatter, job.out, taps, mr, temp, pr, nr, int(c0));
          }
          continue;
        }
        if (in_place(p)) {
          RowTargets(out_m + colofs[c0], job.out_ch, mr, dst);
          kernel(kc, a, job.lda, mr, bp, dst, bias, !first);
          continue;
        }
        RowTargets(temp, kNnCols, mr, dst);
        kernel(kc, a, job.lda, mr, bp, dst, bias, false);
        if (job.gap_w > 0) {
          WriteWithGaps(job, out_m, temp, mr, runs + panel_run[p],
                        panel_run[p + 1] - panel_run[p], c0, colofs);
          continue;
        }
        const int nc = int(std::min<int64_t>(kNnCols, ncols - c0));
        for (int i = 0; i < mr; ++i) {
          float* o = out_m + int64_t(i) * job.out_ch;
          const float* t = temp + i * kNnCols;
          for (int j = 0; j < nc; ++j) {
            float& dst = o[colofs[c0 + j]];
            dst = first ? t[j] : dst + t[j];
          }
        }
      }
    }
  }
#if SINGA_ISA_LEVEL >= 1 && defined(__AVX2__)
  // Orders WriteWithGaps' streaming stores before whatever reads dx next.
  if (job.gap_w > 0) _mm_sfence();
#endif
}

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

// Prefetches part `part` of `parts` of [p, p + floats) into L2.
inline void PrefetchL2Part(const float* p, int64_t floats, int part,
                           int parts) {
  const int64_t lines = (floats + 15) / 16;
  for (int64_t l = lines * part / parts; l < lines * (part + 1) / parts; ++l)
    __builtin_prefetch(p + l * 16, 0, 2);
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
  for (int64_t r0 = q0; r0 < q1;) {
    // Blocks stay within one plane of D.
    const int64_t plane = r0 / job.dplane;
    const int64_t r1 =
        std::min({q1, r0 + kNtBlock, (plane + 1) * job.dplane});
    const int lp = int(RoundUp(r1 - r0, kVW));
    const float* d = job.d + plane * job.d_img + (r0 - plane * job.dplane);
    PackNt(job, r0, r1, lp, k0, k1, pb);
    // When this block is a whole image read in place and the next image is
    // in the range, its dy plane and input channels are prefetched into L2,
    // a slice per tile row: the hardware prefetchers do not follow the jump
    // to the next image, and a memory-bound layer (ResNet's 1x1 stride-2
    // shortcut) otherwise waits on memory at every image.
    const int64_t next = plane + 1;
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
    for (int ch = 0; ch < lp; ch += kNtChunk) {
      const int n = std::min(kNtChunk, lp - ch);
      for (int i = 0; i < Mp; i += kNtRows) {
        if (ahead && ch == 0) {
          PrefetchL2Part(nx, nx_len, i / kNtRows, Mp / kNtRows);
          PrefetchL2Part(nd, nd_len, i / kNtRows, Mp / kNtRows);
        }
        for (int j = 0; j < tiles_j; ++j)
          KernelNT(n, d + int64_t(i) * job.ldd + ch, job.ldd,
                   std::min(kNtRows, M - i),
                   pb + int64_t(j) * kNtCols * lp + ch, lp,
                   wide + (int64_t(i / kNtRows) * tiles_j + j) * kNtRows *
                              kNtCols);
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
