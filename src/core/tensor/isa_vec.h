// The vector type of the ISA family a per-ISA file is compiled for (see
// cpu_isa.h): kVW float lanes (4 baseline, 8 AVX2, 16 AVX-512) as a GCC
// vector, with unaligned loads and stores. Everything here lives in the
// family's own namespace with internal linkage, so the families' copies
// never meet at link time.
#ifndef SINGA_SRC_CORE_TENSOR_ISA_VEC_H_
#define SINGA_SRC_CORE_TENSOR_ISA_VEC_H_

#include <cstdint>
#include <cstring>

#if defined(__AVX2__) || defined(__AVX512F__)
#include <immintrin.h>
#elif defined(__SSE2__)
#include <emmintrin.h>
#endif

#ifndef SINGA_ISA_NS
#error "isa_vec.h is for per-ISA files: define SINGA_ISA_NS and SINGA_ISA_LEVEL"
#endif

namespace singa {
namespace cpu {
namespace SINGA_ISA_NS {
namespace {

#if SINGA_ISA_LEVEL >= 2
constexpr int kVW = 16;
#elif SINGA_ISA_LEVEL == 1
constexpr int kVW = 8;
#else
constexpr int kVW = 4;
#endif

typedef float Vec __attribute__((vector_size(kVW * sizeof(float))));
typedef int32_t IVec __attribute__((vector_size(kVW * sizeof(int32_t))));

inline Vec Load(const float* p) {
  Vec v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void Store(float* p, Vec v) { std::memcpy(p, &v, sizeof v); }

// A vector whose lower and upper halves are at lo and hi, and its store.
// Intrinsics rather than memcpy into the vector: GCC keeps a tile of such
// vectors in memory otherwise.
#if SINGA_ISA_LEVEL >= 2 && defined(__AVX512DQ__)
inline Vec LoadHalves(const float* lo, const float* hi) {
  return Vec(_mm512_insertf32x8(_mm512_castps256_ps512(_mm256_loadu_ps(lo)),
                                _mm256_loadu_ps(hi), 1));
}
inline void StoreHalves(float* lo, float* hi, Vec v) {
  _mm256_storeu_ps(lo, _mm512_extractf32x8_ps(__m512(v), 0));
  _mm256_storeu_ps(hi, _mm512_extractf32x8_ps(__m512(v), 1));
}
#elif SINGA_ISA_LEVEL == 1 && defined(__AVX__)
inline Vec LoadHalves(const float* lo, const float* hi) {
  return Vec(_mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(lo)),
                                  _mm_loadu_ps(hi), 1));
}
inline void StoreHalves(float* lo, float* hi, Vec v) {
  _mm_storeu_ps(lo, _mm256_castps256_ps128(__m256(v)));
  _mm_storeu_ps(hi, _mm256_extractf128_ps(__m256(v), 1));
}
#else
inline Vec LoadHalves(const float* lo, const float* hi) {
  Vec v;
  for (int l = 0; l < kVW / 2; ++l) {
    v[l] = lo[l];
    v[kVW / 2 + l] = hi[l];
  }
  return v;
}
inline void StoreHalves(float* lo, float* hi, Vec v) {
  for (int l = 0; l < kVW / 2; ++l) {
    lo[l] = v[l];
    hi[l] = v[kVW / 2 + l];
  }
}
#endif

// Lanes [0, n) of the vector at p, zero above (LoadFirst), or stored to p
// (StoreFirst), for 0 <= n <= kVW; p + lane is not touched for lanes at and
// above n, so they may lie outside the buffer.
#if SINGA_ISA_LEVEL >= 2 && defined(__AVX512F__)
inline Vec LoadFirst(const float* p, int n) {
  return Vec(_mm512_maskz_loadu_ps(__mmask16((1u << n) - 1u), p));
}
inline void StoreFirst(float* p, Vec v, int n) {
  _mm512_mask_storeu_ps(p, __mmask16((1u << n) - 1u), __m512(v));
}
#elif SINGA_ISA_LEVEL == 1 && defined(__AVX2__)
inline Vec LoadFirst(const float* p, int n) {
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return Vec(_mm256_maskload_ps(p, _mm256_cmpgt_epi32(_mm256_set1_epi32(n), lane)));
}
// Not vmaskmovps: as a store it is microcoded on AMD Zen, many times slower
// than stores of four, two and one floats (it took a quarter of the
// convolution's packing time on a 4x4 plane, conv_pack.h's StorePart).
inline void StoreFirst(float* p, Vec v, int n) {
  if (n == kVW) return Store(p, v);
  __m128 h = _mm256_castps256_ps128(__m256(v));
  if (n & 4) {
    std::memcpy(p, &h, 4 * sizeof(float));
    h = _mm256_extractf128_ps(__m256(v), 1);
    p += 4;
  }
  if (n & 2) {
    std::memcpy(p, &h, 2 * sizeof(float));
    h = _mm_movehl_ps(h, h);
    p += 2;
  }
  if (n & 1) std::memcpy(p, &h, sizeof(float));
}
#else
inline Vec LoadFirst(const float* p, int n) {
  Vec v{};
  for (int l = 0; l < n; ++l) v[l] = p[l];
  return v;
}
inline void StoreFirst(float* p, Vec v, int n) {
  for (int l = 0; l < n; ++l) p[l] = v[l];
}
#endif

// Pieces of four floats and their transpose, for rows of records that lie
// anywhere: QuadsOf(p, k, off) is the vector whose 128-bit block b holds
// the four floats at p[4 * b + k] + off; Transpose4 turns the four vectors
// for k = 0..3 into columns, lane 4 * b + k of column e holding element e
// of p[4 * b + k]'s piece. In-lane unpacks and shuffles rather than the
// scalar moves of a plain gather, which take a load and a store a float.
// JoinQuads(q) is the vector whose 128-bit block b is q[b]. QuadLines
// lays four such columns' blocks side by side: lines[16 b + 4 c + e] =
// col[c][4 b + e], so each block's four pieces make one line of 16 floats.
#if SINGA_ISA_LEVEL >= 2 && defined(__AVX512DQ__)
inline Vec JoinQuads(const __m128* q) {
  const __m256 lo = _mm256_insertf128_ps(_mm256_castps128_ps256(q[0]), q[1], 1);
  const __m256 hi = _mm256_insertf128_ps(_mm256_castps128_ps256(q[2]), q[3], 1);
  return Vec(_mm512_insertf32x8(_mm512_castps256_ps512(lo), hi, 1));
}
inline Vec QuadsOf(const float* const* p, int k, int off) {
  const __m128 q[4] = {_mm_loadu_ps(p[k] + off), _mm_loadu_ps(p[4 + k] + off),
                       _mm_loadu_ps(p[8 + k] + off), _mm_loadu_ps(p[12 + k] + off)};
  return JoinQuads(q);
}
// Written as shuffles of the vector type: GCC 12's _mm512_unpacklo_ps and
// _mm512_shuffle_ps warn of an uninitialised operand where they inline.
inline void Transpose4(const Vec* v, Vec* col) {
  const Vec t0 = __builtin_shufflevector(v[0], v[1], 0, 16, 1, 17, 4, 20, 5, 21, 8, 24, 9,
                                         25, 12, 28, 13, 29);
  const Vec t1 = __builtin_shufflevector(v[0], v[1], 2, 18, 3, 19, 6, 22, 7, 23, 10, 26, 11,
                                         27, 14, 30, 15, 31);
  const Vec t2 = __builtin_shufflevector(v[2], v[3], 0, 16, 1, 17, 4, 20, 5, 21, 8, 24, 9,
                                         25, 12, 28, 13, 29);
  const Vec t3 = __builtin_shufflevector(v[2], v[3], 2, 18, 3, 19, 6, 22, 7, 23, 10, 26, 11,
                                         27, 14, 30, 15, 31);
  col[0] = __builtin_shufflevector(t0, t2, 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13,
                                   28, 29);
  col[1] = __builtin_shufflevector(t0, t2, 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14,
                                   15, 30, 31);
  col[2] = __builtin_shufflevector(t1, t3, 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13,
                                   28, 29);
  col[3] = __builtin_shufflevector(t1, t3, 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14,
                                   15, 30, 31);
}
inline void QuadLines(const Vec* col, float* lines) {
  const Vec t0 = __builtin_shufflevector(col[0], col[1], 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18,
                                         19, 20, 21, 22, 23);
  const Vec t1 = __builtin_shufflevector(col[0], col[1], 8, 9, 10, 11, 12, 13, 14, 15, 24,
                                         25, 26, 27, 28, 29, 30, 31);
  const Vec t2 = __builtin_shufflevector(col[2], col[3], 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18,
                                         19, 20, 21, 22, 23);
  const Vec t3 = __builtin_shufflevector(col[2], col[3], 8, 9, 10, 11, 12, 13, 14, 15, 24,
                                         25, 26, 27, 28, 29, 30, 31);
  Store(lines, __builtin_shufflevector(t0, t2, 0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24,
                                       25, 26, 27));
  Store(lines + 16, __builtin_shufflevector(t0, t2, 4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22,
                                            23, 28, 29, 30, 31));
  Store(lines + 32, __builtin_shufflevector(t1, t3, 0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19,
                                            24, 25, 26, 27));
  Store(lines + 48, __builtin_shufflevector(t1, t3, 4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22,
                                            23, 28, 29, 30, 31));
}
#elif SINGA_ISA_LEVEL == 1 && defined(__AVX__)
inline Vec JoinQuads(const __m128* q) {
  return Vec(_mm256_insertf128_ps(_mm256_castps128_ps256(q[0]), q[1], 1));
}
inline Vec QuadsOf(const float* const* p, int k, int off) {
  return LoadHalves(p[k] + off, p[4 + k] + off);
}
inline void Transpose4(const Vec* v, Vec* col) {
  const __m256 t0 = _mm256_unpacklo_ps(__m256(v[0]), __m256(v[1]));
  const __m256 t1 = _mm256_unpackhi_ps(__m256(v[0]), __m256(v[1]));
  const __m256 t2 = _mm256_unpacklo_ps(__m256(v[2]), __m256(v[3]));
  const __m256 t3 = _mm256_unpackhi_ps(__m256(v[2]), __m256(v[3]));
  col[0] = Vec(_mm256_shuffle_ps(t0, t2, 0x44));
  col[1] = Vec(_mm256_shuffle_ps(t0, t2, 0xEE));
  col[2] = Vec(_mm256_shuffle_ps(t1, t3, 0x44));
  col[3] = Vec(_mm256_shuffle_ps(t1, t3, 0xEE));
}
inline void QuadLines(const Vec* col, float* lines) {
  Store(lines, __builtin_shufflevector(col[0], col[1], 0, 1, 2, 3, 8, 9, 10, 11));
  Store(lines + 8, __builtin_shufflevector(col[2], col[3], 0, 1, 2, 3, 8, 9, 10, 11));
  Store(lines + 16, __builtin_shufflevector(col[0], col[1], 4, 5, 6, 7, 12, 13, 14, 15));
  Store(lines + 24, __builtin_shufflevector(col[2], col[3], 4, 5, 6, 7, 12, 13, 14, 15));
}
#else
#if defined(__SSE__)
inline Vec JoinQuads(const __m128* q) {
  Vec v;
  std::memcpy(&v, q, sizeof v);
  return v;
}
#endif
inline Vec QuadsOf(const float* const* p, int k, int off) {
  Vec v;
  for (int b = 0; b < kVW / 4; ++b)
    for (int e = 0; e < 4; ++e) v[4 * b + e] = p[4 * b + k][off + e];
  return v;
}
inline void Transpose4(const Vec* v, Vec* col) {
  float t[4][kVW];
  for (int b = 0; b < kVW / 4; ++b)
    for (int k = 0; k < 4; ++k)
      for (int e = 0; e < 4; ++e) t[e][4 * b + k] = v[k][4 * b + e];
  for (int e = 0; e < 4; ++e) col[e] = Load(t[e]);
}
inline void QuadLines(const Vec* col, float* lines) {
  for (int b = 0; b < kVW / 4; ++b)
    for (int c = 0; c < 4; ++c)
      for (int e = 0; e < 4; ++e) lines[16 * b + 4 * c + e] = col[c][4 * b + e];
}
#endif

#if SINGA_ISA_LEVEL >= 1 && defined(__AVX2__)
// A piece of four floats at p, zero in the lanes whose bit in the mask is
// clear (those are not read, so they may lie outside the buffer).
#if SINGA_ISA_LEVEL >= 2 && defined(__AVX512F__)
using PieceMask = __mmask8;
inline PieceMask PieceMaskOf(unsigned bits) { return PieceMask(bits); }
inline __m128 LoadPiece(const float* p, PieceMask m) { return _mm_maskz_loadu_ps(m, p); }
#else
using PieceMask = __m128i;
inline PieceMask PieceMaskOf(unsigned bits) {
  const __m128i bit = _mm_setr_epi32(1, 2, 4, 8);
  return _mm_cmpeq_epi32(_mm_and_si128(_mm_set1_epi32(int(bits)), bit), bit);
}
inline __m128 LoadPiece(const float* p, PieceMask m) { return _mm_maskload_ps(p, m); }
#endif

// Columns [0, n) (n <= 4) of kVW records lying `stride` floats apart from
// p: col[e] lane l holds p[l * stride + e]. Nothing at or past column n is
// read. Whole pieces (n = 4) take plain loads: with masked ones the
// weight gradient of ResNet-18's 512@4 layer took 1.05-1.06x the time with
// the AVX2 kernels, and with AVX-512 the 256@8 and 512@4 ones 1.08x and
// 1.02x (Zen 5, alternating call by call).
inline void PieceColumns(const float* p, int64_t stride, int n, Vec* col) {
  const PieceMask m = PieceMaskOf((1u << n) - 1u);
  Vec v[4];
  for (int k = 0; k < 4; ++k) {
    __m128 q[kVW / 4];
    for (int b = 0; b < kVW / 4; ++b) {
      const float* s = p + (4 * b + k) * stride;
      q[b] = n == 4 ? _mm_loadu_ps(s) : LoadPiece(s, m);
    }
    v[k] = JoinQuads(q);
  }
  Transpose4(v, col);
}
#endif

// v[l] = base[idx[l]] where ok[l] is all ones, 0 where it is zero (those
// lanes are not read, so their offsets may be anything): one masked gather
// with AVX2 and AVX-512.
inline Vec GatherOrZero(const float* base, IVec idx, IVec ok) {
#if SINGA_ISA_LEVEL >= 2 && defined(__AVX512F__)
  const __mmask16 m = _mm512_test_epi32_mask(__m512i(ok), __m512i(ok));
  return Vec(_mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, __m512i(idx), base, 4));
#elif SINGA_ISA_LEVEL == 1 && defined(__AVX2__)
  return Vec(_mm256_mask_i32gather_ps(_mm256_setzero_ps(), base, __m256i(idx),
                                      _mm256_castsi256_ps(__m256i(ok)), 4));
#else
  Vec v{};
  for (int l = 0; l < kVW; ++l)
    if (ok[l]) v[l] = base[idx[l]];
  return v;
#endif
}

// a * b + c as one instruction where there is one. Written out, the
// compiler (allowed to reassociate here) regroups a tile's sums into trees
// whose partial sums no longer fit in the registers.
inline Vec Fma(Vec a, Vec b, Vec c) {
#if SINGA_ISA_LEVEL >= 2 && defined(__AVX512F__)
  return Vec(_mm512_fmadd_ps(__m512(a), __m512(b), __m512(c)));
#elif SINGA_ISA_LEVEL == 1 && defined(__FMA__)
  return Vec(_mm256_fmadd_ps(__m256(a), __m256(b), __m256(c)));
#else
  return a * b + c;
#endif
}

// Stores v at p (aligned to a vector) bypassing the caches where the ISA
// can, for data written once and read only later; the caller runs
// StreamFence before other threads read it.
inline void StreamStore(float* p, Vec v) {
#if SINGA_ISA_LEVEL >= 2 && defined(__AVX512F__)
  _mm512_stream_ps(p, __m512(v));
#elif SINGA_ISA_LEVEL == 1 && defined(__AVX2__)
  _mm256_stream_ps(p, __m256(v));
#else
  Store(p, v);
#endif
}

// p[0:n] = f(j) for j = 0, kVW, ... (f returns a Vec) with StreamStore,
// and g(j), a float, for the lanes before the first aligned vector and
// after the last whole one.
template <class F, class G>
inline void StreamRow(float* p, int n, F f, G g) {
  int j = 0;
  for (; j < n && reinterpret_cast<uintptr_t>(p + j) % sizeof(Vec) != 0; ++j)
    p[j] = g(j);
  for (; j + kVW <= n; j += kVW) StreamStore(p + j, f(j));
  for (; j < n; ++j) p[j] = g(j);
}

inline void StreamFence() {
#if defined(__SSE2__)
  _mm_sfence();
#endif
}

// Fetches the cache line at p into L2. GCC counts __builtin_prefetch as
// free of side effects and deletes loops made of nothing else; the asm
// stays.
inline void PrefetchL2(const void* p) {
#if defined(__x86_64__) || defined(__i386__)
  asm volatile("prefetcht1 %0" : : "m"(*static_cast<const char*>(p)));
#else
  __builtin_prefetch(p, 0, 2);
#endif
}

// Fetches the cache line at p into L1 (and L2); asm for the same reason.
inline void PrefetchL1(const void* p) {
#if defined(__x86_64__) || defined(__i386__)
  asm volatile("prefetcht0 %0" : : "m"(*static_cast<const char*>(p)));
#else
  __builtin_prefetch(p, 0, 3);
#endif
}

// Fetches the cache lines of [p, p + n) into L1, for n > 0: every 16th
// float and the last, so a span that starts mid-line still gets its end.
inline void PrefetchL1Span(const float* p, int64_t n) {
  for (int64_t f = 0; f < n; f += 16) PrefetchL1(p + f);
  PrefetchL1(p + n - 1);
}

// Fetches share `part` of `parts` of the cache lines of [p, p + floats)
// into L2, for data the next piece of work reads from memory.
inline void PrefetchL2Part(const float* p, int64_t floats, int part, int parts) {
  const int64_t lines = (floats + 15) / 16;
  for (int64_t l = lines * part / parts; l < lines * (part + 1) / parts; ++l)
    PrefetchL2(p + l * 16);
}

// From this many floats (8 MiB) on, an operand read once per call is
// taken to miss the caches, and the kernels that stream it fetch it a
// piece of work ahead (AVX2 EPYC, 32 MB L3: an RGB stem's dy of 8-16 MB
// gained, dy of 2-4 MB, which stays cached between calls, lost 1-5%; see
// doc/performance.md).
constexpr int64_t kFetchAheadFloats = int64_t(2) << 20;

}  // namespace
}  // namespace SINGA_ISA_NS
}  // namespace cpu
}  // namespace singa

#endif  // SINGA_SRC_CORE_TENSOR_ISA_VEC_H_
