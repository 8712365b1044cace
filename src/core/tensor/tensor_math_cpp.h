// CPU backend kernels: vectorisable loops spread over OpenMP threads above a
// size threshold. Only tensor_math_cpp_isa.cc includes this file; it is
// compiled once per ISA family (with fast-math flags that keep NaN and Inf
// semantics), each copy in namespace singa::cpu::SINGA_ISA_NS, and
// tensor_math_cpp.cc dispatches Math<lang::Cpp> to the copy for the CPU.
#ifndef SINGA_SRC_CORE_TENSOR_TENSOR_MATH_CPP_H_
#define SINGA_SRC_CORE_TENSOR_TENSOR_MATH_CPP_H_

#ifndef SINGA_ISA_NS
#error "tensor_math_cpp.h is compiled per ISA: define SINGA_ISA_NS"
#endif

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

// Streaming stores use AVX-512 intrinsics in the AVX-512 copy, and the
// float <-> float16 casts F16C's in the AVX2 and AVX-512 copies; the
// baseline copy takes the portable loops.
#if defined(__AVX512F__) || defined(__F16C__)
#include <immintrin.h>
#endif

#ifdef _OPENMP
#include <omp.h>
#endif

#include "tensor_math.h"
#include "transpose8.h"
#include "vector_math.h"

namespace singa {
namespace cpu {
namespace SINGA_ISA_NS {

// Below this many elements a loop runs on the calling thread: forking a
// team costs more than it saves.
constexpr int64_t kParallelMin = 1 << 15;

inline int Threads(int64_t work) {
#ifdef _OPENMP
  return work >= kParallelMin ? omp_get_max_threads() : 1;
#else
  (void)work;
  return 1;
#endif
}

// Calls fn(offsets, len) for every contiguous run of the innermost dimension,
// splitting long runs so that every thread gets a share. offsets[k] is the
// element offset of operand k at the start of the run.
template <typename Fn>
void ForRuns(const ElemSpace& sp, Fn&& fn) {
  if (sp.size == 0) return;
  const int last = sp.ndim - 1;
  const int64_t len = sp.shape[last];
  const int64_t rows = sp.size / len;
  const int nth = Threads(sp.size);
  // Pieces per run: enough that rows * pieces covers the threads.
  int64_t pieces = 1;
  if (nth > 1 && rows < 4 * nth) pieces = std::min<int64_t>((4 * nth + rows - 1) / rows, (len + 255) / 256);
  if (pieces < 1) pieces = 1;
  const int64_t piece_len = (len + pieces - 1) / pieces;
  const int64_t tasks = rows * pieces;
  auto task = [&](int64_t t) {
    int64_t r = t / pieces, p = t % pieces;
    int64_t begin = p * piece_len;
    if (begin >= len) return;
    int64_t n = std::min(piece_len, len - begin);
    int64_t off[4] = {0, 0, 0, 0};
    for (int d = last - 1; d >= 0; --d) {
      int64_t i = r % sp.shape[d];
      r /= sp.shape[d];
      for (int k = 0; k < sp.nops; ++k) off[k] += i * sp.stride[k][d];
    }
    for (int k = 0; k < sp.nops; ++k) off[k] += begin * sp.stride[k][last];
    fn(off, n);
  };
  // Small loops skip the OpenMP runtime altogether: even a parallel region
  // whose if clause is false sets up a team, which costs more than the loop.
  if (nth == 1) {
    for (int64_t t = 0; t < tasks; ++t) task(t);
    return;
  }
#pragma omp parallel for schedule(static) num_threads(nth)
  for (int64_t t = 0; t < tasks; ++t) task(t);
}

// Runs at least this long (elements) are written with streaming stores:
// the output then skips the read-for-ownership trip through the caches,
// a third of the memory traffic of a large binary op. Shorter outputs stay
// cached for the op that reads them next.
constexpr int64_t kStreamMin = int64_t(1) << 19;

// y[i] = f(i) for i in [0, n), vectorised.
template <typename T, typename F>
inline void WriteRun(T* y, int64_t n, F&& f) {
#if defined(__AVX512F__)
  if constexpr (sizeof(T) == 4) {
    if (n >= kStreamMin) {
      int64_t i = 0;
      for (; i < n && (reinterpret_cast<uintptr_t>(y + i) & 63); ++i) y[i] = f(i);
      for (; i + 16 <= n; i += 16) {
        alignas(64) T t[16];
#pragma omp simd
        for (int k = 0; k < 16; ++k) t[k] = f(i + k);
        _mm512_stream_si512(reinterpret_cast<__m512i*>(y + i),
                            _mm512_load_si512(reinterpret_cast<const void*>(t)));
      }
      for (; i < n; ++i) y[i] = f(i);
      _mm_sfence();
      return;
    }
  }
#endif
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] = f(i);
}

template <typename Op, typename T>
void Unary(const ElemSpace& sp, const T* x, T* y, Op op) {
  const int64_t sy = sp.stride[0][sp.ndim - 1], sx = sp.stride[1][sp.ndim - 1];
  ForRuns(sp, [&](const int64_t* off, int64_t n) {
    T* yo = y + off[0];
    const T* xo = x + off[1];
    if (sy == 1 && sx == 1) {
      WriteRun(yo, n, [&](int64_t i) { return op(xo[i]); });
    } else {
      for (int64_t i = 0; i < n; ++i) yo[i * sy] = op(xo[i * sx]);
    }
  });
}

template <typename Op, typename T>
void Binary(const ElemSpace& sp, const T* a, const T* b, T* y,
                             Op op) {
  const int last = sp.ndim - 1;
  const int64_t sy = sp.stride[0][last], sa = sp.stride[1][last],
                sb = sp.stride[2][last];
  ForRuns(sp, [&](const int64_t* off, int64_t n) {
    T* yo = y + off[0];
    const T* ao = a + off[1];
    const T* bo = b + off[2];
    // y may alias a or b exactly (in-place ops), so no __restrict here.
    if (sy == 1 && sa == 1 && sb == 1) {
      WriteRun(yo, n, [&](int64_t i) { return op(ao[i], bo[i]); });
    } else if (sy == 1 && sa == 1 && sb == 0) {
      const T bv = *bo;
      WriteRun(yo, n, [&](int64_t i) { return op(ao[i], bv); });
    } else if (sy == 1 && sa == 0 && sb == 1) {
      const T av = *ao;
      WriteRun(yo, n, [&](int64_t i) { return op(av, bo[i]); });
    } else {
      for (int64_t i = 0; i < n; ++i) yo[i * sy] = op(ao[i * sa], bo[i * sb]);
    }
  });
}

template <typename T>
void Where(const ElemSpace& sp, const T* cond, const T* a,
                            const T* b, T* y) {
  const int last = sp.ndim - 1;
  const int64_t sy = sp.stride[0][last], sc = sp.stride[1][last],
                sa = sp.stride[2][last], sb = sp.stride[3][last];
  ForRuns(sp, [&](const int64_t* off, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
      const T c = cond[off[1] + i * sc];
      y[off[0] + i * sy] = c != T(0) ? a[off[2] + i * sa] : b[off[3] + i * sb];
    }
  });
}

template <typename TO, typename TI>
inline TO Convert(TI x) {
  return static_cast<TO>(x);
}
template <>
inline float Convert<float, Half>(Half x) {
  return HalfToFloat(x.bits);
}
template <>
inline Half Convert<Half, float>(float x) {
  return Half{FloatToHalf(x)};
}
template <>
inline Half Convert<Half, int32_t>(int32_t x) {
  return Half{FloatToHalf(static_cast<float>(x))};
}
template <>
inline Half Convert<Half, Half>(Half x) {
  return x;
}
// Float to int saturates (NaN to 0) instead of invoking undefined behaviour.
template <>
inline int32_t Convert<int32_t, float>(float x) {
  return op::ToElem<int32_t>(x);
}
template <>
inline int32_t Convert<int32_t, Half>(Half x) {
  return op::ToElem<int32_t>(HalfToFloat(x.bits));
}

// Copies a transposed 2-D pattern (input stride 1 on the second-to-last
// loop axis, output stride 1 on the last) in square tiles, so both sides
// are read and written a cache line at a time.
template <typename TI, typename TO>
bool TiledTranspose(const ElemSpace& sp, const TI* x, TO* y) {
  const int d = sp.ndim;
  if (d < 2 || sp.stride[0][d - 1] != 1 || sp.stride[1][d - 2] != 1 ||
      sp.stride[1][d - 1] == 1)
    return false;
  constexpr int64_t kTile = 32;
  const int64_t rows = sp.shape[d - 2], cols = sp.shape[d - 1];
  const int64_t ys = sp.stride[0][d - 2], xs = sp.stride[1][d - 1];
  const int64_t outer = sp.size / (rows * cols);
  const int64_t rt = (rows + kTile - 1) / kTile, ct = (cols + kTile - 1) / kTile;
  const int nth = Threads(sp.size);
#pragma omp parallel for collapse(2) schedule(static) num_threads(nth) if (nth > 1)
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t t = 0; t < rt * ct; ++t) {
      int64_t yo = 0, xo = 0, r = o;
      for (int k = d - 3; k >= 0; --k) {
        const int64_t i = r % sp.shape[k];
        r /= sp.shape[k];
        yo += i * sp.stride[0][k];
        xo += i * sp.stride[1][k];
      }
      const int64_t r0 = (t / ct) * kTile, c0 = (t % ct) * kTile;
      const int64_t r1 = std::min(rows, r0 + kTile), c1 = std::min(cols, c0 + kTile);
      if constexpr (std::is_same<TI, TO>::value && sizeof(TI) == 4) {
        if (r1 - r0 == kTile && c1 - c0 == kTile) {
          for (int64_t i = r0; i < r1; i += 8)
            for (int64_t j = c0; j < c1; j += 8)
              Transpose8x8(x + xo + i + j * xs, xs, y + yo + i * ys + j, ys);
          continue;
        }
      }
      for (int64_t i = r0; i < r1; ++i) {
        TO* yr = y + yo + i * ys;
        const TI* xr = x + xo + i;
        for (int64_t j = c0; j < c1; ++j) yr[j] = Convert<TO>(xr[j * xs]);
      }
    }
  }
  return true;
}

// y[i] = Convert<TO>(x[i]) for a contiguous run. float <-> float16 takes
// 8 (16 with AVX-512) values per F16C instruction where the family has it,
// rounding to nearest even whatever MXCSR says; the scalar tail gives the
// same bits (common.h's FloatToHalf and HalfToFloat follow F16C on NaN).
template <typename TO, typename TI>
inline void ConvertRun(const TI* x, TO* y, int64_t n) {
  int64_t i = 0;
#if defined(__F16C__)
  constexpr bool to_half = std::is_same<TI, float>::value && std::is_same<TO, Half>::value;
  constexpr bool from_half = std::is_same<TI, Half>::value && std::is_same<TO, float>::value;
  if constexpr (to_half) {
    const float* xf = reinterpret_cast<const float*>(x);
#if defined(__AVX512F__)
    for (; i + 16 <= n; i += 16)
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i),
                          _mm512_cvtps_ph(_mm512_loadu_ps(xf + i),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
#endif
    for (; i + 8 <= n; i += 8)
      _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i),
                       _mm256_cvtps_ph(_mm256_loadu_ps(xf + i), _MM_FROUND_TO_NEAREST_INT));
  } else if constexpr (from_half) {
    float* yf = reinterpret_cast<float*>(y);
#if defined(__AVX512F__)
    for (; i + 16 <= n; i += 16)
      _mm512_storeu_ps(yf + i, _mm512_cvtph_ps(_mm256_loadu_si256(
                                   reinterpret_cast<const __m256i*>(x + i))));
#endif
    for (; i + 8 <= n; i += 8)
      _mm256_storeu_ps(yf + i, _mm256_cvtph_ps(_mm_loadu_si128(
                                   reinterpret_cast<const __m128i*>(x + i))));
  }
#endif
  for (; i < n; ++i) y[i] = Convert<TO>(x[i]);
}

template <typename TI, typename TO>
void Cast(const ElemSpace& sp, const TI* x, TO* y) {
  if (sp.size >= 4096 && TiledTranspose(sp, x, y)) return;
  const int64_t sy = sp.stride[0][sp.ndim - 1], sx = sp.stride[1][sp.ndim - 1];
  ForRuns(sp, [&](const int64_t* off, int64_t n) {
    TO* yo = y + off[0];
    const TI* xo = x + off[1];
    if (sy == 1 && sx == 1) {
      ConvertRun(xo, yo, n);
    } else {
      for (int64_t i = 0; i < n; ++i) yo[i * sy] = Convert<TO>(xo[i * sx]);
    }
  });
}

template <typename T>
void Fill(const ElemSpace& sp, T value, T* y) {
  const int64_t sy = sp.stride[0][sp.ndim - 1];
  ForRuns(sp, [&](const int64_t* off, int64_t n) {
    T* yo = y + off[0];
    if (sy == 1) {
      std::fill(yo, yo + n, value);
    } else {
      for (int64_t i = 0; i < n; ++i) yo[i * sy] = value;
    }
  });
}

template <typename T>
struct SumR {
  static T Init() { return T(0); }
  // int32 sums wrap modulo 2^32 (signed overflow would be undefined).
  static T Combine(T a, T b) {
    if constexpr (std::is_integral<T>::value)
      return static_cast<T>(static_cast<uint32_t>(a) + static_cast<uint32_t>(b));
    else
      return a + b;
  }
};
// The identities are -inf / +inf for floats, so that the maximum of
// values that are all -inf is -inf (as in NumPy and on the GPU).
template <typename T>
constexpr T Lowest() {
  return std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity()
                                              : std::numeric_limits<T>::lowest();
}
template <typename T>
constexpr T Highest() {
  return std::numeric_limits<T>::has_infinity ? std::numeric_limits<T>::infinity()
                                              : std::numeric_limits<T>::max();
}

template <typename T>
struct MaxR {
  static T Init() { return Lowest<T>(); }
  // NaN wins, as in NumPy.
  static T Combine(T a, T b) { return (b > a || b != b) ? b : a; }
};
template <typename T>
struct MinR {
  static T Init() { return Highest<T>(); }
  static T Combine(T a, T b) { return (b < a || b != b) ? b : a; }
};

template <typename R, typename T>
T ReduceRun(const T* x, int64_t n) {
  // Several independent accumulators let the loop vectorise.
  constexpr int kLanes = 64 / sizeof(T);
  T acc[kLanes];
  for (int l = 0; l < kLanes; ++l) acc[l] = R::Init();
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
#pragma omp simd
    for (int l = 0; l < kLanes; ++l) acc[l] = R::Combine(acc[l], x[i + l]);
  }
  T r = R::Init();
  for (int l = 0; l < kLanes; ++l) r = R::Combine(r, acc[l]);
  for (; i < n; ++i) r = R::Combine(r, x[i]);
  return r;
}

template <typename R, typename T>
void ReduceImpl(int64_t outer, int64_t n, int64_t inner, const T* x, T* y) {
  const int nth = Threads(outer * n * inner);
  if (inner == 1) {
    if (outer >= nth) {
#pragma omp parallel for schedule(static) num_threads(nth) if (nth > 1)
      for (int64_t o = 0; o < outer; ++o) y[o] = ReduceRun<R>(x + o * n, n);
    } else {
      // Few long rows: split each row over the threads, then combine.
      for (int64_t o = 0; o < outer; ++o) {
        std::vector<T> part(nth, R::Init());
        const int64_t chunk = (n + nth - 1) / nth;
#pragma omp parallel for num_threads(nth) if (nth > 1)
        for (int t = 0; t < nth; ++t) {
          int64_t b = t * chunk, e = std::min(n, b + chunk);
          if (b < e) part[t] = ReduceRun<R>(x + o * n + b, e - b);
        }
        T r = R::Init();
        for (T p : part) r = R::Combine(r, p);
        y[o] = r;
      }
    }
    return;
  }
  // Rows of length inner are folded into one accumulator row, a column
  // block at a time so the accumulator stays in L1 while rows stream by.
  auto fold = [inner](const T* xo, int64_t i0, int64_t i1, T* acc) {
    constexpr int64_t kBlock = 4096;
    for (int64_t j0 = 0; j0 < inner; j0 += kBlock) {
      const int64_t j1 = std::min(inner, j0 + kBlock);
      for (int64_t j = j0; j < j1; ++j) acc[j] = xo[i0 * inner + j];
      for (int64_t i = i0 + 1; i < i1; ++i) {
        const T* __restrict xr = xo + i * inner;
#pragma omp simd
        for (int64_t j = j0; j < j1; ++j) acc[j] = R::Combine(acc[j], xr[j]);
      }
    }
  };
  if (outer >= nth) {
#pragma omp parallel for schedule(static) num_threads(nth) if (nth > 1)
    for (int64_t o = 0; o < outer; ++o) fold(x + o * n * inner, 0, n, y + o * inner);
    return;
  }
  // Few outer slices: each thread folds a band of whole rows (contiguous
  // reads), then the partial rows are combined.
  std::vector<T> part(static_cast<size_t>(nth) * inner);
  for (int64_t o = 0; o < outer; ++o) {
    const T* xo = x + o * n * inner;
    const int64_t band = (n + nth - 1) / nth;
    int used = 0;
#pragma omp parallel for num_threads(nth) reduction(max : used)
    for (int t = 0; t < nth; ++t) {
      const int64_t i0 = t * band, i1 = std::min(n, i0 + band);
      if (i0 < i1) {
        fold(xo, i0, i1, part.data() + t * inner);
        used = std::max(used, t + 1);
      }
    }
    T* yo = y + o * inner;
    std::copy(part.begin(), part.begin() + inner, yo);
    for (int t = 1; t < used; ++t) {
      const T* pt = part.data() + t * inner;
#pragma omp simd
      for (int64_t j = 0; j < inner; ++j) yo[j] = R::Combine(yo[j], pt[j]);
    }
  }
}

template <typename T>
void Reduce(ReduceKind kind, int64_t outer, int64_t n,
                             int64_t inner, const T* x, T* y) {
  if (n == 0) {
    // Only a sum has an identity for an empty axis; callers reject max/min.
    std::fill(y, y + outer * inner, T(0));
    return;
  }
  switch (kind) {
    case ReduceKind::kSum:
      ReduceImpl<SumR<T>>(outer, n, inner, x, y);
      break;
    case ReduceKind::kMax:
      ReduceImpl<MaxR<T>>(outer, n, inner, x, y);
      break;
    case ReduceKind::kMin:
      ReduceImpl<MinR<T>>(outer, n, inner, x, y);
      break;
  }
}

template <typename T>
void ArgReduce(bool is_max, int64_t outer, int64_t n,
                                int64_t inner, const T* x, int32_t* y) {
  const int nth = Threads(outer * n * inner);
#pragma omp parallel for collapse(2) num_threads(nth) if (nth > 1)
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t j = 0; j < inner; ++j) {
      const T* xo = x + o * n * inner + j;
      int64_t best = 0;
      T bv = xo[0];
      for (int64_t i = 1; i < n; ++i) {
        T v = xo[i * inner];
        if (bv != bv) break;  // the first NaN wins, as in NumPy
        if (is_max ? (v > bv || v != v) : (v < bv || v != v)) {
          bv = v;
          best = i;
        }
      }
      y[o * inner + j] = static_cast<int32_t>(best);
    }
  }
}

template <typename T>
void Softmax(bool log, int64_t outer, int64_t n,
                              int64_t inner, const T* x, T* y) {
  const int nth = Threads(outer * n * inner);
#pragma omp parallel for collapse(2) num_threads(nth) if (nth > 1)
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t j = 0; j < inner; ++j) {
      const T* xo = x + o * n * inner + j;
      T* yo = y + o * n * inner + j;
      T mx = std::numeric_limits<T>::lowest();
      for (int64_t i = 0; i < n; ++i) mx = std::max(mx, xo[i * inner]);
      T sum = 0;
      if (log) {
        for (int64_t i = 0; i < n; ++i) sum += std::exp(xo[i * inner] - mx);
        const T lse = mx + std::log(sum);
        for (int64_t i = 0; i < n; ++i) yo[i * inner] = xo[i * inner] - lse;
      } else {
        for (int64_t i = 0; i < n; ++i) {
          T e = std::exp(xo[i * inner] - mx);
          yo[i * inner] = e;
          sum += e;
        }
        const T inv = T(1) / sum;
        for (int64_t i = 0; i < n; ++i) yo[i * inner] *= inv;
      }
    }
  }
}

}  // namespace SINGA_ISA_NS
}  // namespace cpu
}  // namespace singa

#endif  // SINGA_SRC_CORE_TENSOR_TENSOR_MATH_CPP_H_
