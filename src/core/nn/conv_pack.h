// Shared by the per-ISA convolution files (conv_isa.cc, conv_nt_isa.cc):
// partial-vector helpers, the register-tile shapes, and the packing of
// implicit-GEMM rows straight from the NCHW tensor. Everything lives in the
// family's namespace with internal linkage, so each file and each family
// keeps its own copy. The matrices and the tap addressing are described in
// conv_engine.h.
#ifndef SINGA_SRC_CORE_NN_CONV_PACK_H_
#define SINGA_SRC_CORE_NN_CONV_PACK_H_

#include <algorithm>
#include <cstdint>
#include <cstring>

#if defined(__AVX2__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "conv_engine.h"
#include "isa_vec.h"

#ifndef SINGA_ISA_NS
#error "conv_pack.h is for per-ISA files: define SINGA_ISA_NS and SINGA_ISA_LEVEL"
#endif

namespace singa {
namespace cpu {
namespace SINGA_ISA_NS {
namespace {

inline Vec Splat(float x) { return Vec{} + x; }
// Lanes [lo, hi) of the vector at p, zero elsewhere; lanes outside [lo, hi)
// are not read, so p + lane may lie outside the buffer there (the zero
// padding of a window). StorePart writes lanes [0, n) only (none when n <= 0).
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
#elif SINGA_ISA_LEVEL == 1 && defined(__AVX2__)
inline __m256i LaneMask(int lo, int hi) {
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_and_si256(_mm256_cmpgt_epi32(lane, _mm256_set1_epi32(lo - 1)),
                          _mm256_cmpgt_epi32(_mm256_set1_epi32(hi), lane));
}
inline Vec LoadPart(const float* p, int lo, int hi) {
  return Vec(_mm256_maskload_ps(p, LaneMask(lo, hi)));
}
#else
inline Vec LoadPart(const float* p, int lo, int hi) {
  Vec v{};
  for (int l = std::max(lo, 0); l < std::min(hi, kVW); ++l) v[l] = p[l];
  return v;
}
#endif
inline void StorePart(float* p, Vec v, int n) {
  if (n > 0) StoreFirst(p, v, std::min(n, kVW));
}

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
constexpr int kHalfVW = kVW / 2;
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
// Rows of the one-vector tile that products with at most kVW pixels take
// when a vector is 16 floats (a 4x4 plane at batch 1 would leave half of a
// two-vector tile empty); 0 where there is no such tile.
#if SINGA_ISA_LEVEL >= 2
constexpr int kNnNarrowRows = 28;
#else
constexpr int kNnNarrowRows = 0;
#endif
constexpr int kNnMaxRows = std::max(kNnRowChoices[0], kNnNarrowRows);

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
inline void CopyEven(float* __restrict d, const float* __restrict s, int n) {
  IVec even;
  for (int l = 0; l < kVW; ++l) even[l] = 2 * l;
  int j = 0;
  for (; j + kVW <= n; j += kVW) {
    const Vec v = __builtin_shuffle(Load(s + 2 * j), Load(s + 2 * j + kVW), even);
    Store(d + j, v);
  }
  if (j + kHalfVW <= n) {
    // Half a vector from one load (8-pixel rows of a stride-2 grid with
    // AVX-512).
    const Vec v = __builtin_shuffle(Load(s + 2 * j), even);
    std::memcpy(d + j, &v, kHalfVW * sizeof(float));
    j += kHalfVW;
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

// Where half a vector (kHalfVW lanes) of a packed panel lands in a
// channel-fastest scatter job's output, before the tap's offsets: `base`
// floats from the output's start, at row y and column x of the tap's plane;
// y < 0 when the half does not lie within one run. Halves rather than whole
// vectors, so that AVX-512 vectors over grids 8 pixels wide (LeNet's second
// data gradient) still add in place, each half on its own row.
struct VecSpot {
  int64_t base;
  int y, x;
};

struct Runs {
  Buffer<Run> buf;
  int count = 0;
  const Run* begin() const { return buf.data(); }
  const Run* end() const { return buf.data() + count; }
};

// Splits grid pixels [q0, q1) into runs along grid rows, and also at every
// multiple of `split` packed columns when split > 0.
inline void BuildRuns(const Grid& g, int64_t q0, int64_t q1, int split, Runs* runs) {
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
  if (ssx == 2) {
    // Each vector of outputs from the two vectors of the row it spans,
    // lanes outside the row masked to zero, its even lanes taken. The
    // left and right taps of a padded window touch the padding at every
    // row start or end and took scalar loops of up to kVW - 1 floats here
    // before: ResNet-18's stride-2 layers took 0.90-0.95x the time at one
    // thread in the forward and the weight gradient (AVX-512), 0.93-0.96x
    // with the AVX2 kernels (Zen 5, alternating call by call).
    IVec even;
    for (int l = 0; l < kVW; ++l) even[l] = 2 * l;
    for (int j = 0; j < len; j += kVW) {
      const int a = x0 + 2 * j;
      const Vec v0 = LoadPart(src + a, -a, sw - a);
      const Vec v1 = len - j > kHalfVW ? LoadPart(src + a + kVW, -a - kVW, sw - a - kVW)
                                       : Vec{};
      const Vec v = __builtin_shuffle(v0, v1, even);
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
  for (int j = lo; j < hi; ++j) dst[j] = src[x0 + j * ssx];
  for (int j = hi; j < len; ++j) dst[j] = 0.f;
}

// v's lanes spread over the even lanes of two vectors, zeros between:
// lane l of v goes to lane 2l of *lo (l < kVW / 2) or 2l - kVW of *hi.
inline void SpreadEven(Vec v, Vec* lo, Vec* hi) {
  IVec a, b;
  for (int l = 0; l < kVW; ++l) {
    a[l] = l % 2 ? kVW : l / 2;
    b[l] = l % 2 ? kVW : kVW / 2 + l / 2;
  }
  *lo = __builtin_shuffle(v, Vec{}, a);
  *hi = __builtin_shuffle(v, Vec{}, b);
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
  // x0 + j * ssx in [0, sw) for j in [lo, hi).
  const int lo = x0 >= 0 ? 0 : std::min(len, (-x0 + ssx - 1) / ssx);
  const int hi = x0 >= sw ? lo
                          : std::max(lo, std::min(len, (sw - 1 - x0) / ssx + 1));
  if (ssx == 2 && hi - lo > 8) {
    // kVW values spread over two vectors of dst with zeros in the odd
    // lanes between them, which then add nothing; dst is touched from its
    // first target to its last only (the row's neighbours may belong to
    // another thread's channel). The stride-2 data gradients of ResNet-18's
    // 64 -> 128 layer (dy rows of 16) took 0.83-0.87x the time at one thread
    // and 0.85-0.90x at two with AVX-512, 0.91-0.96x and 0.95x with AVX2
    // (5x5, 64 -> 128: 0.85-0.91x and 0.85-0.88x with AVX-512), against the
    // scalar adds below. Rows of 8 and 4 keep those (as does every run of a
    // tile 8 columns wide): there the vectors were even or up to 1.15x
    // slower, the partial loads of one tap's row waiting on the previous
    // tap's partial stores to the same floats (Zen 5, processes
    // alternating).
    for (int j = lo; j < hi; j += kVW) {
      const int n = std::min(kVW, hi - j);
      float* d = dst + x0 + 2 * j;
      Vec a, b;
      SpreadEven(n == kVW ? Load(src + j) : LoadFirst(src + j, n), &a, &b);
      const int span = 2 * n - 1;  // floats from the first target to the last
      if (span >= kVW) {
        Store(d, Load(d) + a);
        const int rest = span - kVW;
        if (rest == kVW - 1 && x0 + 2 * (j + kVW) <= sw)
          Store(d + kVW, Load(d + kVW) + b);  // the last odd lane is in the row
        else if (rest > 0)
          StoreFirst(d + kVW, LoadFirst(d + kVW, rest) + b, rest);
      } else {
        StoreFirst(d, LoadFirst(d, span) + a, span);
      }
    }
    return;
  }
  for (int j = lo; j < hi; ++j) dst[x0 + j * ssx] += src[j];
}

// Row k = (c * tr + i) * tc + j of t as its (c, i, j), so that walking rows
// needs no division.
struct TapCursor {
  int c, i, j;
  TapCursor(const TapRows& t, int k)
      : c(k / (t.tr * t.tc)), i(k / t.tc % t.tr), j(k % t.tc) {}
};

// Rows of one tap per channel (a 1x1 kernel, or dy read as channels) over
// a list of runs: each run's offset within a channel is worked out once,
// and blocks of channels are then copied run by run with nothing else per
// run, where PackRows' general walk works each run out again for every row
// (bounds, taps). The data gradient of ResNet-18's 1x1 stride-2 shortcut,
// whose dy rows are all one tap, took 0.83-0.85x the time (Zen 5, AVX-512;
// doc/design.md).
class OneTapRuns {
 public:
  // False unless t has one tap per channel, numbered channel by channel,
  // with a column stride of 1 or 2, and every run lies inside the source
  // plane (CopyEven reads one float past its last).
  bool Build(const TapRows& t, const Run* runs, int nruns) {
    if (t.tr != 1 || t.tc != 1 || t.channel_fastest || t.ssx > 2)
      return false;
    int64_t* off = offs_.Reserve(size_t(nruns));
    for (int u = 0; u < nruns; ++u) {
      const Run& r = runs[u];
      const int y = r.qy * t.ssy + t.offy[0], x = r.qx * t.ssx + t.offx[0];
      const int end = x + (t.ssx == 2 ? 2 * r.len : r.len);
      if (y < 0 || y >= t.sh || x < 0 || end > t.sw) return false;
      off[u] = r.b * t.img_stride + int64_t(y) * t.sw + x;
    }
    runs_ = runs;
    nruns_ = nruns;
    ssx_ = t.ssx;
    return true;
  }
  // Channels [c0, c0 + kc) into dst, channel c0 + k's run u at dst + k *
  // kstride + run_offset(run u). With `prefetch`, each run's piece of the
  // next channel is fetched into L1 as the run is copied (see PackRows),
  // and the one after into L2. The L2 fetch took the forward of ResNet-18's
  // 1x1 stride-2 shortcut at batch 64 (x of 16 MiB, every other row read)
  // 0.88x the time at one thread and 0.86x at two with AVX-512, 0.84x and
  // 0.86x with the AVX2 kernels; other 1x1 layers at batch 1 and 64, and
  // their gradients, took 0.96-1.03x (Zen 4, alternating call by call).
  // Fetching into L2 alone, one channel ahead, took 1.08-1.10x on a
  // stride-1 1x1 forward (256 channels of 16x16); doing the same in
  // PackRows' general walk gave the 3x3 and 5x5 layers 0.97-1.03x.
  template <typename RunOffset>
  void Pack(const TapRows& t, int c0, int kc, float* dst, int64_t kstride,
            RunOffset run_offset, bool prefetch) const {
    // Locals, not members: the stores below could alias a member, and
    // GCC would reload each (through the thread-local object) every run.
    const int64_t* off = offs_.data();
    const Run* runs = runs_;
    const int nruns = nruns_, ssx = ssx_;
    for (int k = 0; k < kc; ++k) {
      const float* chan = t.src + int64_t(c0 + k) * t.cstride;
      float* d = dst + k * kstride;
      const bool ahead = prefetch && c0 + k + 1 < t.channels;
      const bool far = prefetch && c0 + k + 2 < t.channels;
      const uintptr_t step = uintptr_t(t.cstride) * sizeof(float);
      for (int u = 0; u < nruns; ++u) {
        const Run& r = runs[u];
        const float* src = chan + off[u];
        if (ahead) {
          const float* next = src + t.cstride;
          const uintptr_t end = uintptr_t(next + (r.len - 1) * ssx);
          for (uintptr_t a = uintptr_t(next) & ~uintptr_t(63); a <= end;
               a += 64) {
            __builtin_prefetch(reinterpret_cast<const void*>(a));
            if (far) PrefetchL2(reinterpret_cast<const void*>(a + step));
          }
        }
        float* o = d + run_offset(r);
        if (ssx == 2)
          CopyEven(o, src, r.len);
        else if (r.len == kVW)
          Store(o, Load(src));
        else
          Copy(o, src, r.len);
      }
    }
  }
  const int64_t* offsets() const { return offs_.data(); }

 private:
  Buffer<int64_t> offs_;
  const Run* runs_ = nullptr;
  int nruns_ = 0, ssx_ = 1;
};

// The rows of short runs by gathers, for the implicit GEMM's panels. Where
// runs average at most 4 floats (ResNet-18's 4x4 planes), or at stride 2
// half a vector (its 8x8 outputs with AVX-512), PackRows' walk spends more
// on each run's bounds, taps and partial vectors than on its floats. The
// columns are taken instead kVW at a time (a slot), and each slot of each
// row is read with one masked gather, at offsets within the channel worked
// out once per tap (lanes in the padding masked off).
class GatherRuns {
 public:
  // False where the runs are longer, do not number the columns 0, 1, ... in
  // order, the rows are numbered channel-fastest, the kernel has more than
  // kMaxTaps taps, or an offset would not fit 32 bits.
  bool Build(const TapRows& t, const Run* runs, int nruns) {
    const int taps = t.tr * t.tc;
    if (t.channel_fastest || nruns == 0 || taps > kMaxTaps) return false;
    int cols = 0;
    int64_t reach = 0;
    for (int u = 0; u < nruns; ++u) {
      if (runs[u].col != cols) return false;
      cols += runs[u].len;
      reach = std::max(reach, runs[u].b * t.img_stride);
    }
    // Runs of 8 at stride 1 (LeNet's second layer) took 1.45x the time by
    // gathers with AVX-512 and 1.24x with AVX2; at stride 2 with AVX-512,
    // 0.75-0.97x.
    const int most = t.ssx >= 2 ? std::max(4, kVW / 2) : 4;
    if (cols > nruns * most) return false;
    if (reach + int64_t(t.sh) * t.sw > INT32_MAX) return false;
    // Each column's image offset and grid position scaled to the source.
    Lane* lane = lane_.Reserve(size_t(cols));
    for (int u = 0; u < nruns; ++u)
      for (int l = 0; l < runs[u].len; ++l)
        lane[runs[u].col + l] = Lane{runs[u].b * t.img_stride, runs[u].qy * t.ssy,
                                     (runs[u].qx + l) * t.ssx};
    cols_ = cols;
    const int slots = (cols + kVW - 1) / kVW;
    int32_t* idx = idx_.Reserve(size_t(taps) * slots * kVW);
    int32_t* ok = ok_.Reserve(size_t(taps) * slots * kVW);
    for (int i = 0; i < t.tr; ++i)
      for (int j = 0; j < t.tc; ++j)
        for (int q = 0; q < slots * kVW; ++q) {
          const int64_t at = (int64_t(i) * t.tc + j) * slots * kVW + q;
          bool in = q < cols;
          int y = 0, x = 0;
          if (in) {
            y = lane[q].y + t.offy[i];
            x = lane[q].x + t.offx[j];
            in = y >= 0 && y < t.sh && x >= 0 && x < t.sw;
          }
          idx[at] = in ? int32_t(lane[q].img + int64_t(y) * t.sw + x) : 0;
          ok[at] = in ? -1 : 0;
        }
    return true;
  }
  // Rows [k0, k0 + kc) (k0 as the cursor `at`) into panels of `width`
  // columns (a multiple of kVW): row k of column q at dst + (q / width) *
  // panel + k * width + q % width.
  void Pack(const TapRows& t, TapCursor at, int kc, float* dst, int width,
            int64_t panel) const {
    const int32_t* idx = idx_.data();
    const int32_t* ok = ok_.data();
    const int cols = cols_, slots = (cols + kVW - 1) / kVW, taps = t.tr * t.tc;
    int c = at.c, tap = at.i * t.tc + at.j;
    for (int k = 0; k < kc; ++k) {
      const float* chan = t.src + int64_t(c) * t.cstride;
      const int32_t* ti = idx + int64_t(tap) * slots * kVW;
      const int32_t* to = ok + int64_t(tap) * slots * kVW;
      float* d = dst + int64_t(k) * width;
      for (int s = 0; s < slots; ++s) {
        const int q = s * kVW;
        IVec vi, vo;
        std::memcpy(&vi, ti + q, sizeof vi);
        std::memcpy(&vo, to + q, sizeof vo);
        const Vec v = GatherOrZero(chan, vi, vo);
        float* o = d + q / width * panel + q % width;
        if (q + kVW <= cols)
          Store(o, v);
        else
          StoreFirst(o, v, cols - q);
      }
      if (++tap == taps) {
        tap = 0;
        ++c;
      }
    }
  }

 private:
  static constexpr int kMaxTaps = 49;
  struct Lane {
    int64_t img;
    int y, x;
  };
  Buffer<Lane> lane_;
  Buffer<int32_t> idx_, ok_;
  int cols_ = 0;
};

// Rows [k0, k0 + kc) of t (k0 given as the cursor `at`) over the pixels of
// `runs`: row k0 + k of run r goes to dst + k * kstride + RunOffset(r), len
// floats. Taps sharing a source row (one channel and kernel row) are done
// together, channel by channel over all runs, so the source is swept in
// order rather than jumping between channels for every run.
template <typename RunOffset>
void PackRows(const TapRows& t, const Run* runs, int nruns, TapCursor at,
              int kc, float* dst, int64_t kstride, RunOffset run_offset) {
  thread_local OneTapRuns one_tap;
  if (one_tap.Build(t, runs, nruns)) {
    one_tap.Pack(t, at.c, kc, dst, kstride, run_offset, true);
    return;
  }
  int c = at.c, i = at.i, j = at.j;
  for (int k = 0; k < kc;) {
    const int n = std::min(t.tc - j, kc - k);
    const int* ox = t.offx + j;
    // Tap offsets are monotonic, so the ends bound them all.
    const int lo = std::min(ox[0], ox[n - 1]), hi = std::max(ox[0], ox[n - 1]);
    const float* chan = t.src + c * t.cstride;
    // Rows of a stride-2 grid are read every other one, which the hardware
    // prefetchers follow poorly. At stride 1 they stream in order, but rows
    // that are whole channels (one tap) are copied as fast as memory brings
    // them: fetching the next channel too took the data gradients of
    // LeNet's second layer and ResNet-18's 1x1 stride-2 shortcut (dy read
    // as channels) 0.91-0.98x the time, where LeNet's second forward, whose
    // taps share each source row, took 1.02-1.04x (AVX2 Zen 4, alternating
    // call by call; 1.05-1.11x on Zen 5, its 737 KB in L2). Arrays beyond
    // L2 are fetched ahead whatever the taps: a 5x5 64-channel 16x16 layer
    // at batch 64 (4 MiB) took 0.91x the time forward and 0.85x for the
    // data gradient at one thread, 0.99x and 0.93x at two (Zen 5).
    const bool prefetch =
        (t.ssy > 1 || (t.tr == 1 && t.tc == 1) || t.fetch_ahead) &&
        c + 1 < t.channels;
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
        } else if (r.len == kHalfVW) {
          // Half a vector (LeNet's 8-pixel rows with AVX-512) in one move.
          for (int v = 0; v < n; ++v)
            std::memcpy(d + v * kstride, s0 + ox[v], kHalfVW * sizeof(float));
        } else {
          for (int v = 0; v < n; ++v) Copy(d + v * kstride, s0 + ox[v], r.len);
        }
      } else if (t.ssx == 2 && xbase + lo >= 0 &&
                 xbase + hi + 2 * r.len <= t.sw) {
        // Stride 2 inside the image (CopyEven reads one float past the
        // last it takes, still inside the row).
        const float* s0 = row + xbase;
        for (int v = 0; v < n; ++v) CopyEven(d + v * kstride, s0 + ox[v], r.len);
      } else if (t.ssx == 1 && r.len % kVW == 0) {
        // Whole vectors of a row that reaches into the padding (padded 5x5
        // kernels): one masked load each, inline, instead of a FillRow call
        // with its checks per tap (FillRow held a fifth of the 5x5 64@16
        // weight gradient's samples). The 5x5 forward and weight gradient
        // took 0.88-0.97x the time with AVX-512 (one and two threads) and
        // 0.92-0.98x with the AVX2 kernels (Zen 5); the RGB stem was even.
        for (int v = 0; v < n; ++v) {
          const int x0 = xbase + ox[v];
          float* o = d + v * kstride;
          for (int w = 0; w < r.len; w += kVW)
            Store(o + w, LoadPart(row + x0 + w, -(x0 + w), t.sw - (x0 + w)));
        }
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

inline int64_t RoundUp(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

struct NnScratch {
  Runs runs;
  Buffer<int> panel_run;    // first run of each panel, then the run count
  Buffer<int64_t> colofs;   // output offset (channel 0) of each column
  Buffer<int> segs;         // first column of each run of adjacent outputs
  Buffer<int> panel_seg;    // first such run of each panel, then the count
  Buffer<VecSpot> spots;    // kNnVecs per panel (channel-fastest scatter)
  GatherRuns gather;        // the panels' rows by gathers, where runs are short
};

inline NnScratch& NnLocal() {
  thread_local NnScratch s;
  return s;
}

}  // namespace
}  // namespace SINGA_ISA_NS
}  // namespace cpu
}  // namespace singa

#endif  // SINGA_SRC_CORE_NN_CONV_PACK_H_
