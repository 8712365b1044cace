// The 2x2 stride-2 max pool of most CNNs, for one ISA family (included by
// pool_isa.cc only): forward loads two input rows and splits even and odd
// columns with shuffles, keeping the argmax when asked; backward writes each
// 2x2 block of dx once from dy and the argmax. MaxPool2x2Pass and
// MaxPool2x2Backward run planes [q0, q1) (image, channel pairs) and flag,
// in Strays, NaN or infinite inputs (forward) and argmaxes outside their
// own window (backward), whose planes the caller then redoes (the forward
// with the exact pass, the backward with the general scatter). With
// AVX-512, planes of whole output rows per 16-lane block (WholeRows2x2)
// take permute-based loops instead of the walk. Internal linkage in the
// family's namespace, as conv_pack.h.
#ifndef SINGA_SRC_CORE_NN_POOL2X2_H_
#define SINGA_SRC_CORE_NN_POOL2X2_H_

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <limits>
#include <type_traits>

#include "isa_vec.h"
#include "nn_isa.h"

#ifndef SINGA_ISA_NS
#error "pool2x2.h is for per-ISA files: define SINGA_ISA_NS and SINGA_ISA_LEVEL"
#endif

namespace singa {
namespace cpu {
namespace SINGA_ISA_NS {
namespace {
template <int N>
using Int = std::integral_constant<int, N>;

// GCC vectors of W floats / int32s: the 2x2 pool also runs 4- and 8-lane
// blocks, for rows too short to fill a kVW vector (LeNet's rows have 4 and
// 12 outputs).
template <int W>
struct Lanes {
  typedef float F __attribute__((vector_size(W * sizeof(float))));
  typedef int32_t I __attribute__((vector_size(W * sizeof(int32_t))));
  typedef uint32_t U __attribute__((vector_size(W * sizeof(uint32_t))));
};

template <class V, class T>
inline V LoadV(const T* p) {
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// A block of W outputs of the 2x2 pool takes lanes [0, W/2) from one place
// and [W/2, W) from another: the next W/2 outputs of the same row (kRow),
// or a piece of another row, so rows of 4 outputs fill 8-lane vectors in
// pairs. The outputs of two rows are W/2 apart when the rows have W/2
// outputs (kAdjacent) and elsewhere otherwise (kApart); only kApart loads
// and stores y, dy and argmax in halves. Halves are combined and split in
// registers: going through memory would stall on store forwarding.
enum Mode { kRow, kApart, kAdjacent };
template <int M>
using ModeC = std::integral_constant<int, M>;

template <class V, bool kSplit, class T, int... L>
inline V LoadPair(const T* p0, const T* p1, std::integer_sequence<int, L...>) {
  if constexpr (!kSplit) {
    return LoadV<V>(p0);
  } else {
    typedef T H __attribute__((vector_size(sizeof(V) / 2)));
    return __builtin_shufflevector(LoadV<H>(p0), LoadV<H>(p1), L...);
  }
}

template <class V, bool kSplit, class T>
inline V LoadPair(const T* p0, const T* p1) {
  return LoadPair<V, kSplit>(
      p0, p1, std::make_integer_sequence<int, sizeof(V) / sizeof(T)>());
}

template <bool kSplit, class T, class V, int... L>
inline void StorePair(T* p0, T* p1, V v, std::integer_sequence<int, L...>) {
  if constexpr (!kSplit) {
    std::memcpy(p0, &v, sizeof v);
  } else {
    constexpr int kHalf = sizeof...(L);
    const auto lo = __builtin_shufflevector(v, v, L...);
    const auto hi = __builtin_shufflevector(v, v, (L + kHalf)...);
    std::memcpy(p0, &lo, sizeof lo);
    std::memcpy(p1, &hi, sizeof hi);
  }
}

template <bool kSplit, class T, class V>
inline void StorePair(T* p0, T* p1, V v) {
  StorePair<kSplit>(
      p0, p1, v, std::make_integer_sequence<int, sizeof(V) / sizeof(T) / 2>());
}

// Inside a block the lanes are kept in the order that in-lane shuffles
// (shufps, unpcklps: one instruction, where a full even/odd split across
// 128-bit lanes takes three) produce: in each group of 4 lanes, two outputs
// of the first half, then two of the second. Lane i holds output Perm(i).
template <int W>
constexpr int Perm(int i) {
  return i % 4 < 2 ? 2 * (i / 4) + i % 4 : W / 2 + 2 * (i / 4) + i % 4 - 2;
}

// Inverse of Perm: the lane that holds output j.
template <int W>
constexpr int Slot(int j) {
  int i = 0;
  while (Perm<W>(i) != j) ++i;
  return i;
}

// Lane-order shuffles as compile-time index lists (GCC turns a mask built
// in a loop into a general permute).
template <int W>
constexpr int EvenIn(int l) {
  return l % 4 < 2 ? 4 * (l / 4) + 2 * (l % 4) : W + 4 * (l / 4) + 2 * (l % 4 - 2);
}
template <int W>
constexpr int Unpack(int l) {
  return (l % 2 ? W : 0) + 4 * (l / 4) + (l % 4) / 2;
}

// Even (kOdd false) or odd inputs of a and b, in lane order.
template <bool kOdd, class V, int... L>
inline V Split(V a, V b, std::integer_sequence<int, L...>) {
  return __builtin_shufflevector(a, b, (EvenIn<sizeof...(L)>(L) + kOdd)...);
}
// Lane order to output order (kBack) or back.
template <bool kBack, class V, int... L>
inline V Reorder(V v, std::integer_sequence<int, L...>) {
  constexpr int W = sizeof...(L);
  return __builtin_shufflevector(v, v, (kBack ? Slot<W>(L) : Perm<W>(L))...);
}
// a0 b0 a1 b1 of each group of 4 lanes (kHigh false) or a2 b2 a3 b3.
template <bool kHigh, class V, int... L>
inline V Merge(V a, V b, std::integer_sequence<int, L...>) {
  return __builtin_shufflevector(a, b, (Unpack<sizeof...(L)>(L) + 2 * kHigh)...);
}

// Where a block's two halves lie: the offset of the top-left input of the
// first window in x (and dx), of the first output in y (dy and argmax), and
// that input's index within its plane (what argmax records).
struct Half {
  size_t in, out;
  int32_t at;
};

// Plane index of the top-left input of each lane's window, in lane order.
template <int W, int... L>
inline typename Lanes<W>::I Corners(int32_t at0, int32_t at1,
                                    std::integer_sequence<int, L...>) {
  typedef typename Lanes<W>::I I;
  const I step = {(2 * (Perm<W>(L) % (W / 2)))...};
  const I upper = {(-(Perm<W>(L) >= W / 2))...};
  return step + (upper ? I{} + at1 : I{} + at0);
}

template <int W>
inline typename Lanes<W>::I Corners(int32_t at0, int32_t at1) {
  return Corners<W>(at0, at1, std::make_integer_sequence<int, W>());
}

// A walk passes each block either these corners, kept up to date with one
// vector add per block where the walk allows it, or FromHalves: work them
// out from the halves' plane indices (two broadcasts and a blend).
struct FromHalves {};

template <int W, class C>
inline typename Lanes<W>::I CornersOf(C corner, Half h0, Half h1) {
  if constexpr (std::is_same_v<C, FromHalves>)
    return Corners<W>(h0.at, h1.at);
  else
    return corner;
}

// One block of a 2x2, stride-2, unpadded, undilated max pool. The result
// must be the generic loop's: taps in the order (0,0) (0,1) (1,0) (1,1),
// each taken when greater than the best so far or NaN, starting from -inf
// with argmax -1; so the first maximum wins a tie, the last NaN wins, and
// an all -inf window has argmax -1.
//
// kExact follows that rule tap by tap. The fast form assumes finite
// inputs: it compares the taps in pairs, left before right and top before
// bottom (the same first maximum), and sets lanes holding a NaN or an
// infinity in *nan so the caller can redo the rows exactly.
template <int W, int kMode, bool kArgmax, bool kExact, class I, class C>
inline void MaxPool2x2Block(const float* __restrict x, int w,
                            float* __restrict y, int32_t* __restrict arg,
                            Half h0, Half h1, C corner, I* nan) {
  typedef typename Lanes<W>::F F;
  const auto lanes = std::make_integer_sequence<int, W>();
  const float* t0 = x + h0.in;
  const float* t1 = kMode == kRow ? t0 + W : x + h1.in;
  const F a = LoadV<F>(t0), b = LoadV<F>(t1);
  const F c = LoadV<F>(t0 + w), d = LoadV<F>(t1 + w);
  const F v[4] = {Split<false>(a, b, lanes), Split<true>(a, b, lanes),
                  Split<false>(c, d, lanes), Split<true>(c, d, lanes)};
  const I at = CornersOf<W>(corner, h0, h1);
  F best;
  I idx;
  if constexpr (kExact) {
    const float ninf = -std::numeric_limits<float>::infinity();
    const int32_t tap[4] = {0, 1, w, w + 1};
    best = F{} + ninf;
    idx = I{} - 1;
    for (int t = 0; t < 4; ++t) {
      const I take = (v[t] > best) | (v[t] != v[t]);
      best = take ? v[t] : best;
      if (kArgmax) idx = take ? at + tap[t] : idx;
    }
  } else {
    // A lane of the four loads holding a NaN or an infinity makes its sum
    // minus itself NaN (so does a sum that overflows): such lanes are
    // flagged and the rows redone exactly, which also gives an all -inf
    // window its argmax -1. Summing the loads before they are split costs
    // five vector operations where testing each tap for NaN costs eight.
    const F sum = (a + b) + (c + d);
    *nan |= (sum - sum) != 0;
    const I right_top = v[1] > v[0], right_bot = v[3] > v[2];
    const F top = right_top ? v[1] : v[0], bot = right_bot ? v[3] : v[2];
    const I lower = bot > top;
    best = lower ? bot : top;
    if (kArgmax) idx = at + (lower ? (right_bot & 1) + w : right_top & 1);
  }
  constexpr bool kSplit = kMode == kApart;
  StorePair<kSplit>(y + h0.out, y + h1.out, Reorder<true>(best, lanes));
  if (kArgmax)
    StorePair<kSplit>(arg + h0.out, arg + h1.out, Reorder<true>(idx, lanes));
}

// Lanes flagged by the blocks of each width, tested once per thread: NaN
// or infinite inputs in the forward, and in the backward argmaxes outside their own
// window (ones this forward did not make).
struct Strays {
  typename Lanes<kVW>::I wide{};
  typename Lanes<8>::I eight{};
  typename Lanes<4>::I four{};
  bool one = false;
  template <class V>
  void Add(V bad) {
    if constexpr (sizeof(V) == sizeof(wide))
      wide |= bad;
    else if constexpr (sizeof(V) == sizeof(eight))
      eight |= bad;
    else
      four |= bad;
  }
  void Join(const Strays& o) {
    wide |= o.wide;
    eight |= o.eight;
    four |= o.four;
    one |= o.one;
  }
  bool any() const {
    int r = one;
    for (int l = 0; l < kVW; ++l) r |= wide[l];
    for (int l = 0; l < 8; ++l) r |= eight[l];
    for (int l = 0; l < 4; ++l) r |= four[l];
    return r != 0;
  }
};

// Backward of one block: each window's four cells get dy where the argmax
// points at them and 0 elsewhere, written once (no zero-fill pass).
template <int W, int kMode, class C>
inline void MaxPool2x2BackBlock(const float* __restrict dy,
                                const int32_t* __restrict arg,
                                float* __restrict dx, int w, Half h0, Half h1,
                                C corner, Strays* strays) {
  typedef typename Lanes<W>::F F;
  typedef typename Lanes<W>::I I;
  const auto lanes = std::make_integer_sequence<int, W>();
  constexpr bool kSplit = kMode == kApart;
  const F g =
      Reorder<false>(LoadPair<F, kSplit>(dy + h0.out, dy + h1.out), lanes);
  const I a =
      Reorder<false>(LoadPair<I, kSplit>(arg + h0.out, arg + h1.out), lanes);
  // The argmax relative to its window's top-left cell: 0, 1, w or w + 1.
  const I d = a - CornersOf<W>(corner, h0, h1);
  const I m0 = d == 0, m1 = d == 1, m2 = d == w, m3 = d == w + 1;
  strays->Add(~(m0 | m1 | m2 | m3 | (a < 0)));
  const F z = F{};
  const F tl = m0 ? g : z, tr = m1 ? g : z, bl = m2 ? g : z, br = m3 ? g : z;
  float* t0 = dx + h0.in;
  float* t1 = kMode == kRow ? t0 + W : dx + h1.in;
  const F top0 = Merge<false>(tl, tr, lanes), top1 = Merge<true>(tl, tr, lanes);
  const F bot0 = Merge<false>(bl, br, lanes), bot1 = Merge<true>(bl, br, lanes);
  std::memcpy(t0, &top0, sizeof top0);
  std::memcpy(t1, &top1, sizeof top1);
  std::memcpy(t0 + w, &bot0, sizeof bot0);
  std::memcpy(t1 + w, &bot1, sizeof bot1);
}

// Walks planes with no uncovered last row whose output rows split into
// whole halves of a W-lane block (W / 2 outputs): a block is then W
// consecutive outputs, each half inside one row, so every load and store of
// y, dy and argmax is one full vector and one flat loop covers rows, plane
// boundaries and all (LeNet's 12- and 4-output rows). The row and plane
// bookkeeping is done per half; an odd last half goes output by output.
template <int W, class B, class O>
[[gnu::always_inline]] inline void Flat2x2(const PoolParams& p, int oh,
                                           int ow, long q0, long q1, B block,
                                           O one) {
  constexpr int kHalf = W / 2;
  // From the end of a row's top input row to the next row's start.
  const size_t jump = 2 * size_t(p.w) - 2 * size_t(ow);
  Half cur{q0 * size_t(p.h) * p.w, size_t(q0) * oh * ow, 0};
  int col = 0, row = 0;
  auto next = [&] {
    const Half h = cur;
    cur = Half{cur.in + W, cur.out + kHalf, cur.at + W};
    if ((col += kHalf) == ow) {
      col = 0;
      cur.in += jump;
      cur.at += int32_t(jump);
      if (++row == oh) {
        row = 0;
        cur.at = 0;
      }
    }
    return h;
  };
  long halves = (q1 - q0) * oh * (ow / kHalf);
  // Rows of one half in planes of an even number of rows (LeNet's 8x8
  // maps): a block is two rows of one plane, its window corners kept in a
  // vector that one add moves on.
  if (ow == kHalf && oh % 2 == 0) {
    const size_t w2 = 2 * size_t(p.w);
    const auto first = Corners<W>(0, int32_t(w2));
    auto corner = first;
    int k = 0;
    for (; halves > 0; halves -= 2) {
      block(Int<W>(), ModeC<kAdjacent>(), cur,
            Half{cur.in + w2, cur.out + kHalf, cur.at + int32_t(w2)}, corner);
      cur = Half{cur.in + 2 * w2, cur.out + W, cur.at + 2 * int32_t(w2)};
      corner += 2 * int32_t(w2);
      if (++k == oh / 2) {
        k = 0;
        cur.at = 0;
        corner = first;
      }
    }
    return;
  }
  // Other planes of an even number of rows whose rows hold at most kPeriod
  // halves (LeNet's 24x24 maps) go two rows at a time the same way: those
  // rows' blocks always lie alike relative to the pair's first input, so
  // their offsets and window corners are worked out once and each block
  // adds the pair's base to them (one vector add where the per-half walk
  // below spends as long on its bookkeeping as on a short block).
  constexpr int kPeriod = 16;
  const int per_row = ow / kHalf;
  if (oh % 2 == 0 && per_row <= kPeriod) {
    typedef typename Lanes<W>::I I;
    const size_t w2 = 2 * size_t(p.w);
    int32_t off[kPeriod][2];
    I rel[kPeriod];
    for (int i = 0; i < per_row; ++i) {
      for (int s = 0; s < 2; ++s) {
        const int j = 2 * i + s;
        off[i][s] = int32_t((j / per_row) * w2) + (j % per_row) * W;
      }
      rel[i] = Corners<W>(off[i][0], off[i][1]);
    }
    I base{};
    int k = 0;
    for (long pair = (q1 - q0) * (oh / 2); pair > 0; --pair) {
      for (int i = 0; i < per_row; ++i)
        block(Int<W>(), ModeC<kAdjacent>(),
              Half{cur.in + off[i][0], cur.out + size_t(i) * W,
                   cur.at + off[i][0]},
              Half{cur.in + off[i][1], cur.out + size_t(i) * W + kHalf,
                   cur.at + off[i][1]},
              rel[i] + base);
      cur = Half{cur.in + 2 * w2, cur.out + 2 * size_t(ow),
                 cur.at + 2 * int32_t(w2)};
      base += 2 * int32_t(w2);
      if (++k == oh / 2) {
        k = 0;
        cur.at = 0;
        base = I{};
      }
    }
    return;
  }
  for (; halves >= 2; halves -= 2) {
    const Half h0 = next();
    const Half h1 = next();
    block(Int<W>(), ModeC<kAdjacent>(), h0, h1, FromHalves());
  }
  if (halves) {
    const Half h = next();
    for (int k = 0; k < kHalf; ++k)
      one(Half{h.in + 2 * k, h.out + size_t(k), h.at + 2 * k});
  }
}

// Calls block(Int<W>, ModeC<kMode>, h0, h1, corner) for vector blocks covering
// rows [q0 * oh, q1 * oh) of planes q0 .. q1 - 1, and one(half) for single
// outputs. The walks are inlined into their pass so that the flags the
// blocks gather stay in registers. Planes Flat2x2 can walk go there.
// Otherwise rows go two at a time: each gets whole kVW blocks (and on
// AVX-512 one 8-lane block), then a piece of 4 outputs from each fills one
// 8-lane block together; a last unpaired row's piece runs alone in 4 lanes.
template <class B, class O>
[[gnu::always_inline]] inline void Rows2x2(const PoolParams& p, int oh,
                                           int ow, long q0, long q1, B block,
                                           O one) {
  if (p.h == 2 * oh) {
    if (ow % (kVW / 2) == 0)
      return Flat2x2<kVW>(p, oh, ow, q0, q1, block, one);
    if constexpr (kVW > 8)
      if (ow % 4 == 0) return Flat2x2<8>(p, oh, ow, q0, q1, block, one);
  }
  const int w = p.w;
  const size_t skip = size_t(p.h - 2 * oh) * w;
  const int wide = ow / kVW * kVW;
  const bool eight = kVW >= 16 && ow - wide >= 8;
  const int piece = wide + (eight ? 8 : 0);
  const bool four = kVW >= 8 && ow - piece >= 4;
  const int tail = piece + (four ? 4 : 0);
  auto at = [](Half row, int ox) {
    return Half{row.in + 2 * ox, row.out + ox, row.at + 2 * ox};
  };
  auto full = [&](Half row) {
    for (int ox = 0; ox < wide; ox += kVW)
      block(Int<kVW>(), ModeC<kRow>(), at(row, ox), at(row, ox + kVW / 2),
            FromHalves());
    if constexpr (kVW >= 16)
      if (eight)
        block(Int<8>(), ModeC<kRow>(), at(row, wide), at(row, wide + 4),
              FromHalves());
  };
  auto rest = [&](Half row) {
    for (int ox = tail; ox < ow; ++ox) one(at(row, ox));
  };
  // The current row and its index within its plane.
  Half row{q0 * size_t(p.h) * w, size_t(q0) * oh * ow, 0};
  int oy = 0;
  auto next = [&] {
    row.in += 2 * size_t(w);
    row.out += ow;
    row.at += 2 * w;
    if (++oy == oh) {
      oy = 0;
      row.in += skip;
      row.at = 0;
    }
  };
  const long rows = (q1 - q0) * oh;
  for (long r = 0; r + 1 < rows; r += 2) {
    const Half r0 = row;
    next();
    const Half r1 = row;
    next();
    full(r0);
    full(r1);
    if constexpr (kVW >= 8) {
      if (four && ow == 4)
        block(Int<8>(), ModeC<kAdjacent>(), at(r0, 0), at(r1, 0),
              FromHalves());
      else if (four)
        block(Int<8>(), ModeC<kApart>(), at(r0, piece), at(r1, piece),
              FromHalves());
    }
    rest(r0);
    rest(r1);
  }
  if (rows % 2) {
    full(row);
    if constexpr (kVW >= 8)
      if (four)
        block(Int<4>(), ModeC<kRow>(), at(row, piece), at(row, piece + 2),
              FromHalves());
    rest(row);
  }
}

// Planes whose input is exactly twice the output each way, with output rows
// that divide a kVW-lane block and planes that hold whole blocks (LeNet's
// 8x8 maps: one plane per AVX-512 block).
bool WholeRows2x2(const PoolParams& p, int oh, int ow) {
  return p.h == 2 * oh && p.w == 2 * ow && kVW % ow == 0 &&
         (long(oh) * ow) % kVW == 0;
}

// The fast forward on such planes. A block's kVW outputs read the 4 * kVW
// inputs that follow, four vectors; each tap's values are gathered from them
// by fixed two-vector permutations (the first two vectors for some lanes,
// the last two for the others), then compared as MaxPool2x2Block's fast form
// does, flagging NaN and infinite inputs the same way. AVX-512 only: AVX2
// has no two-vector permute, and built from one-vector ones this took
// 1.9x the time of the Rows2x2 walk.
template <bool kArgmax>
void MaxPool2x2Rows(const float* __restrict x, float* __restrict y,
                    int32_t* __restrict arg, const PoolParams& p, int oh,
                    int ow, long q0, long q1, typename Lanes<kVW>::I* nan) {
  typedef typename Lanes<kVW>::F F;
  typedef typename Lanes<kVW>::I I;
  const int w = p.w;
  I from[4], upper[4], corner;
  for (int e = 0; e < kVW; ++e) {
    corner[e] = 2 * (e / ow) * w + 2 * (e % ow);
    for (int t = 0; t < 4; ++t) {
      const int f = corner[e] + (t & 1) + (t >> 1) * w;
      from[t][e] = f % (2 * kVW);
      upper[t][e] = -(f >= 2 * kVW);
    }
  }
  const long per_plane = long(oh) * ow / kVW;
  I flags{};
  size_t o = size_t(q0) * oh * ow;
  for (long q = q0; q < q1; ++q)
    for (long b = 0; b < per_plane; ++b, o += kVW) {
      const float* s = x + 4 * o;
      const F x0 = LoadV<F>(s), x1 = LoadV<F>(s + kVW);
      const F x2 = LoadV<F>(s + 2 * kVW), x3 = LoadV<F>(s + 3 * kVW);
      const F sum = (x0 + x1) + (x2 + x3);
      flags |= (sum - sum) != 0;
      F v[4];
      for (int t = 0; t < 4; ++t)
        v[t] = upper[t] ? __builtin_shuffle(x2, x3, from[t])
                        : __builtin_shuffle(x0, x1, from[t]);
      const I right_top = v[1] > v[0], right_bot = v[3] > v[2];
      const F top = right_top ? v[1] : v[0], bot = right_bot ? v[3] : v[2];
      const I lower = bot > top;
      const F best = lower ? bot : top;
      std::memcpy(y + o, &best, sizeof best);
      if (kArgmax) {
        const I idx = (corner + int32_t(4 * kVW * b)) +
                      (lower ? (right_bot & 1) + w : right_top & 1);
        std::memcpy(arg + o, &idx, sizeof idx);
      }
    }
  *nan |= flags;
}

// NaN lanes are gathered in a local Strays and merged into *strays once:
// flags kept behind a pointer may alias the argmax stores (both int32), so
// the compiler would load and store them around every block.
template <bool kArgmax, bool kExact>
void MaxPool2x2Pass(const float* __restrict x, float* __restrict y,
                    int32_t* __restrict arg, const PoolParams& p, int oh,
                    int ow, long q0, long q1, Strays* strays) {
  const int w = p.w;
  Strays local;
  Strays* nan = &local;
  if constexpr (!kExact && kVW >= 16)
    if (WholeRows2x2(p, oh, ow)) {
      MaxPool2x2Rows<kArgmax>(x, y, arg, p, oh, ow, q0, q1, &local.wide);
      return strays->Join(local);
    }
  Rows2x2(
      p, oh, ow, q0, q1,
      [&](auto width, auto mode, Half h0, Half h1, auto corner) {
        constexpr int W = decltype(width)::value;
        if constexpr (W == kVW)
          MaxPool2x2Block<W, decltype(mode)::value, kArgmax, kExact>(
              x, w, y, arg, h0, h1, corner, &nan->wide);
        else if constexpr (W == 8)
          MaxPool2x2Block<W, decltype(mode)::value, kArgmax, kExact>(
              x, w, y, arg, h0, h1, corner, &nan->eight);
        else
          MaxPool2x2Block<W, decltype(mode)::value, kArgmax, kExact>(
              x, w, y, arg, h0, h1, corner, &nan->four);
      },
      [&](Half o) {
        const int32_t cell[4] = {0, 1, w, w + 1};
        float best = -std::numeric_limits<float>::infinity();
        int32_t idx = -1;
        for (int t = 0; t < 4; ++t) {
          const float v = x[o.in + cell[t]];
          const bool take = v > best || v != v;
          best = take ? v : best;
          idx = take ? o.at + cell[t] : idx;
        }
        y[o.out] = best;
        if (kArgmax) arg[o.out] = idx;
      });
  strays->Join(local);
}

// Backward on such planes: a block's kVW outputs own the 4 * kVW dx values
// that follow, so each of those four dx vectors is the block's dy spread by
// a fixed permutation, kept where the argmax, spread the same way, names
// that very cell. An argmax outside its window hits no cell: the blocks
// count valid argmaxes (not negative) and hits, which differ only then.
void MaxPool2x2BackRows(const float* __restrict dy,
                        const int32_t* __restrict arg, float* __restrict dx,
                        const PoolParams& p, int oh, int ow, long q0, long q1,
                        Strays* out) {
  typedef typename Lanes<kVW>::F F;
  typedef typename Lanes<kVW>::I I;
  I from[4], cell[4];
  for (int j = 0; j < 4; ++j)
    for (int e = 0; e < kVW; ++e) {
      const int f = j * kVW + e, iy = f / p.w, ix = f % p.w;
      from[j][e] = (iy / 2) * ow + ix / 2;
      cell[j][e] = f;
    }
  const long per_plane = long(oh) * ow / kVW;
  I hits{}, valid{};
  size_t o = size_t(q0) * oh * ow;
  for (long q = q0; q < q1; ++q)
    for (long b = 0; b < per_plane; ++b, o += kVW) {
      const F g = LoadV<F>(dy + o);
      const I a = LoadV<I>(arg + o);
      valid -= a >= I{};
      // Unsigned, so that no argmax (INT32_MIN included) can overflow.
      typedef typename Lanes<kVW>::U U;
      const I rel = I(U(a) - uint32_t(4 * kVW * b));
      const I m0 = __builtin_shuffle(rel, from[0]) == cell[0];
      const I m1 = __builtin_shuffle(rel, from[1]) == cell[1];
      const I m2 = __builtin_shuffle(rel, from[2]) == cell[2];
      const I m3 = __builtin_shuffle(rel, from[3]) == cell[3];
      hits += (m0 + m1) + (m2 + m3);
      const F v0 = m0 ? __builtin_shuffle(g, from[0]) : F{};
      const F v1 = m1 ? __builtin_shuffle(g, from[1]) : F{};
      const F v2 = m2 ? __builtin_shuffle(g, from[2]) : F{};
      const F v3 = m3 ? __builtin_shuffle(g, from[3]) : F{};
      float* d = dx + 4 * o;
      std::memcpy(d, &v0, sizeof v0);
      std::memcpy(d + kVW, &v1, sizeof v1);
      std::memcpy(d + 2 * kVW, &v2, sizeof v2);
      std::memcpy(d + 3 * kVW, &v3, sizeof v3);
    }
  // valid counted up and hits (true is -1) down.
  long sum = 0;
  for (int l = 0; l < kVW; ++l) sum += long(valid[l]) + long(hits[l]);
  out->one |= sum != 0;
}

void MaxPool2x2Backward(const float* __restrict dy,
                        const int32_t* __restrict arg, float* __restrict dx,
                        const PoolParams& p, int oh, int ow, long q0, long q1,
                        Strays* out) {
  // Only AVX-512 gains: the AVX2 family's 8-lane blocks ran as fast
  // through the spread as through Merge (0.95-1.09x on 8x8 and larger maps).
  if constexpr (kVW >= 16)
    if (WholeRows2x2(p, oh, ow))
      return MaxPool2x2BackRows(dy, arg, dx, p, oh, ow, q0, q1, out);
  const int w = p.w;
  Strays local;
  Strays* strays = &local;
  Rows2x2(
      p, oh, ow, q0, q1,
      [&](auto width, auto split, Half h0, Half h1, auto corner) {
        MaxPool2x2BackBlock<decltype(width)::value, decltype(split)::value>(
            dy, arg, dx, w, h0, h1, corner, strays);
      },
      [&](Half o) {
        const int32_t cell[4] = {0, 1, w, w + 1};
        const int32_t a = arg[o.out];
        bool hit = a < 0;
        for (int t = 0; t < 4; ++t) {
          hit |= a == o.at + cell[t];
          dx[o.in + cell[t]] = a == o.at + cell[t] ? dy[o.out] : 0.f;
        }
        strays->one |= !hit;
      });
  out->Join(local);
  // An odd last column or row belongs to no window.
  const size_t in_plane = size_t(p.h) * w;
  for (long q = q0; q < q1; ++q) {
    float* d = dx + q * in_plane;
    if (2 * ow < w)
      for (int iy = 0; iy < 2 * oh; ++iy)
        std::fill(d + size_t(iy) * w + 2 * ow, d + size_t(iy + 1) * w, 0.f);
    std::fill(d + size_t(2 * oh) * w, d + in_plane, 0.f);
  }
}

}  // namespace
}  // namespace SINGA_ISA_NS
}  // namespace cpu
}  // namespace singa

#endif  // SINGA_SRC_CORE_NN_POOL2X2_H_
