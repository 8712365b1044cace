// Batch normalisation over NCHW with per-channel statistics, for one ISA
// family (compiled per family, see cpu_isa.h; batchnorm_cpp.cc checks the
// arguments).
//
// A channel's values are n segments of hw contiguous floats lying c * hw
// floats apart. Walking one channel at a time jumps to a new page every
// segment (a 32x32 plane is one page, an 8x8 plane a quarter of one), which
// defeats the hardware prefetcher and the TLB: that ran at a quarter of a
// copy's speed. So the statistics pass gives each thread one block of
// neighbouring channels, walked sample by sample through long contiguous
// runs, a few samples at a time (see SampleGroup). The pass that writes
// (y, or dx in the backward) either goes on through the same block or,
// where a block's runs are short, waits for every block's statistics and
// takes the array in memory order (see RowOrderOutput). Forward training
// reads x twice and writes y once; backward reads x and dy twice and
// writes dx once, with non-temporal stores when the caller asks (large
// arrays; see batchnorm_cpp.cc). Keeping a block in L2 between the passes
// was measured not to pay: segments c * hw floats apart (a multiple of
// 128 KiB in ResNet) share a few L2 sets on 2 MiB pages, and copying the
// block into a contiguous buffer cost what the second pass then saved.
//
// Reductions keep independent float partial sums per channel (one
// accumulator would make each add wait for the previous one) and move them
// into double every few thousand values, which keeps the statistics
// accurate for large batches without giving up SIMD on the inner loops.
#include <algorithm>
#include <cmath>
#include <cstddef>

#include <omp.h>

#include "isa_vec.h"
#include "nn_isa.h"

#ifndef SINGA_ISA_NS
#error "batchnorm_isa.cc is compiled per ISA: define SINGA_ISA_NS"
#endif

namespace singa {
namespace cpu {
namespace SINGA_ISA_NS {

namespace {

constexpr long kParallelWork = 1L << 15;
// Values per float lane between flushes into double: a lane then holds a
// few hundred terms, whatever the vector width.
constexpr int kFlush = 256 * kVW;
constexpr int kShiftSamples = 8;
constexpr int kGroup = 2;

// A zeroed heap array. std::vector would do, but a compiler that does not
// inline its destructor emits a weak copy of it outside this family's
// namespace, which CheckIsaSymbols.cmake rejects (GCC 13 does so).
template <class T>
class Array {
 public:
  explicit Array(size_t n) : p_(new T[n]()) {}
  ~Array() { delete[] p_; }
  Array(const Array&) = delete;
  Array& operator=(const Array&) = delete;
  T* data() { return p_; }
  T& operator[](size_t i) { return p_[i]; }
  const T& operator[](size_t i) const { return p_[i]; }

 private:
  T* p_;
};

// Channels per block: one block per thread, so each walks its channels
// sample by sample through runs of contiguous memory.
inline int BlockChannels(int c, long work) {
  const int threads = work > kParallelWork ? omp_get_max_threads() : 1;
  return (c + threads - 1) / threads;
}

// Samples whose segments of one channel a statistics pass sums in one
// call: several, so short planes (8x8 is 64 values) do not pay the call's
// fixed work (loading and storing the channel's lanes, adding up the
// register sums) for every plane, and so the pass reads a few neighbouring
// streams at once, which measured faster than one even for 32x32 planes
// (AVX2 EPYC, with 4). On a Zen 5 EPYC, 2 beat 4: the statistics passes
// took 0.66-0.88x the time at one thread and 0.75-1.0x at two (ResNet-18's
// maps, batch 64), the whole backward 0.72-0.97x and 0.88-0.99x, the
// forward 0.86-0.96x and 0.91-1.07x (medians of 200 calls); 1 lost on 4x4
// planes (1.4-1.6x). At most kFlush values, so a lane holds no
// more terms between flushes than with one plane per call.
inline int SampleGroup(int hw) {
  return std::max(1, std::min(kGroup, kFlush / hw));
}

// Two running sums per channel of a block: one vector of float lanes each
// that carries on across calls (an 8x8 plane is only 64 values) and is
// added into double every kFlush values. A call's segments are summed in
// registers (four vectors per sum, so the adds do not wait on each other)
// and reach the channel's lanes once, instead of loading and storing them
// for every vector of input.
class BlockSums {
 public:
  explicit BlockSums(int channels)
      : channels_(channels),
        lanes_(size_t(channels) * 2 * kVW),
        total_(size_t(channels) * 2) {}

  // Adds u(p[j], q[j]) and v(p[j], q[j]) into channel k's two sums for j
  // in [0, len) of `segs` segments lying `stride` floats apart; u and v
  // take floats or Vecs alike.
  template <class U, class V>
  void Add(int k, int segs, long stride, int len, const float* p,
           const float* q, U u, V v) {
    Vec s[4] = {}, t[4] = {}, sa = {}, ta = {};
    for (int g = 0; g < segs; ++g, p += stride, q += stride) {
      int j = 0;
      for (; j + 4 * kVW <= len; j += 4 * kVW)
        for (int r = 0; r < 4; ++r) {
          const Vec x = Load(p + j + r * kVW), y = Load(q + j + r * kVW);
          s[r] += u(x, y);
          t[r] += v(x, y);
        }
      for (; j + kVW <= len; j += kVW) {
        const Vec x = Load(p + j), y = Load(q + j);
        s[1] += u(x, y);
        t[1] += v(x, y);
      }
      for (int l = 0; j < len; ++j, ++l) {
        sa[l] += u(p[j], q[j]);
        ta[l] += v(p[j], q[j]);
      }
    }
    sa += (s[0] + s[1]) + (s[2] + s[3]);
    ta += (t[0] + t[1]) + (t[2] + t[3]);
    float* a = lanes_.data() + size_t(k) * 2 * kVW;
    Store(a, Load(a) + sa);
    Store(a + kVW, Load(a + kVW) + ta);
  }
  // Called after each step's values, len per channel.
  void Next(int len) {
    pending_ += len;
    if (pending_ >= kFlush) Flush();
  }
  void Flush() {
    for (size_t k = 0; k < size_t(channels_) * 2; ++k) {
      float* a = lanes_.data() + k * kVW;
      float s = 0.f;
      for (int l = 0; l < kVW; ++l) {
        s += a[l];
        a[l] = 0.f;
      }
      total_[k] += s;
    }
    pending_ = 0;
  }
  double first(int k) const { return total_[2 * size_t(k)]; }
  double second(int k) const { return total_[2 * size_t(k) + 1]; }

 private:
  int channels_;
  Array<float> lanes_;
  Array<double> total_;
  int pending_ = 0;
};

// y = (x - m) * a + b over one segment. Centring first keeps precision when
// |mean| is large compared with the spread of x. Written with whole vectors
// and a scalar tail: the same loop under `omp simd` took 1.1-1.15x the
// time of the forward pass on 8x8 and 16x16 planes (segments of 64 and
// 256 floats; AVX2 EPYC, one thread, paired in one process).
inline void NormalizeSegment(const float* x, float* y, int len, float m,
                             float a, float b) {
  const Vec vm = Vec{} + m, va = Vec{} + a, vb = Vec{} + b;
  int j = 0;
  for (; j + kVW <= len; j += kVW) Store(y + j, (Load(x + j) - vm) * va + vb);
  for (; j < len; ++j) y[j] = (x[j] - m) * a + b;
}

// Whether the writing pass (y, or dx) takes the array in memory order, one
// contiguous share per thread once every channel's factors are known,
// rather than each thread writing the channel block it summed: when a
// block's run in one sample, cb * hw floats, is at most 64 KiB forward and
// under 64 KiB backward. Measured at two threads against the blocks (AVX2
// EPYC, alternating call by call in one process, medians of 80-120 calls,
// 3 runs): 8x8 and 4x4 planes (256 and 512 channels, batch 32-64) took
// 0.69-0.97x the time forward and 0.84-1.0x backward; 16x16 planes with 128
// channels (runs of exactly 64 KiB) took 0.75-0.90x forward (batch 16-64)
// but 0.95-1.06x backward; 32x32 planes, whose runs are 128 KiB, took
// 0.97-1.08x either way, so they keep the blocks. With one thread the two
// orders are the same.
inline bool RowOrderOutput(int cb, int hw, bool backward) {
  const long run = long(cb) * hw, limit = 16L << 10;
  return backward ? run < limit : run <= limit;
}

// The calling thread's share [k0, k1) of `segs` (sample, channel) segments:
// contiguous memory, split evenly in thread order.
struct Range {
  long k0, k1;
};
inline Range ThreadSegments(long segs) {
  const int threads = omp_get_num_threads(), t = omp_get_thread_num();
  return Range{segs * t / threads, segs * (t + 1) / threads};
}

// y = (x - mean) * mul + bias over the (sample, channel) segments
// [k0, k1) of an NCHW array, in memory order.
inline void NormalizeRange(const float* x, float* y, long k0, long k1, int c,
                           int hw, const float* mean, const float* mul,
                           const float* bias) {
  int ch = int(k0 % c);
  for (long k = k0; k < k1; ++k) {
    NormalizeSegment(x + size_t(k) * hw, y + size_t(k) * hw, hw, mean[ch],
                     mul[ch], bias[ch]);
    if (++ch == c) ch = 0;
  }
}

// The statistics of channels [c0, c1): their mean and biased variance, and
// mul = scale / sqrt(var + eps).
void BlockStatistics(const float* x, const float* scale, float* mean_out,
                     float* var_out, float* mul, int n, int c, int hw,
                     float eps, int c0, int c1) {
  const double count = double(n) * hw;
  // Sums of x - k and (x - k)^2 around k, an estimate of the channel's
  // mean from the first value of up to kShiftSamples planes spread over
  // the batch: near the mean, so E[(x-k)^2] - E[x-k]^2 does not cancel
  // even when |mean| is large against the spread or one sample sits far
  // from the others.
  // The picks are read plane by plane, a steady stride through each
  // sample's run that the prefetcher follows, rather than channel by
  // channel, which jumps across the batch for every value.
  const int picks = std::min(n, kShiftSamples);
  Array<float> k(c1 - c0);
  Array<double> first(c1 - c0);
  for (int t = 0; t < picks; ++t) {
    const float* s = x + (size_t(long(t) * n / picks) * c + c0) * hw;
    for (int ch = c0; ch < c1; ++ch) first[ch - c0] += s[size_t(ch - c0) * hw];
  }
  for (int ch = c0; ch < c1; ++ch) k[ch - c0] = float(first[ch - c0] / picks);
  BlockSums sums(c1 - c0);
  const int group = SampleGroup(hw);
  for (int i = 0; i < n; i += group) {
    const int segs = std::min(group, n - i);
    for (int ch = c0; ch < c1; ++ch) {
      const float* s = x + (size_t(i) * c + ch) * hw;
      const float kc = k[ch - c0];
      sums.Add(
          ch - c0, segs, long(c) * hw, hw, s, s,
          [kc](auto v, auto) { return v - kc; },
          [kc](auto v, auto) { return (v - kc) * (v - kc); });
    }
    sums.Next(segs * hw);
  }
  sums.Flush();
  for (int ch = c0; ch < c1; ++ch) {
    const double d = sums.first(ch - c0) / count;
    // Rounding can take a constant channel's variance just below zero; a
    // NaN stays NaN.
    double var = sums.second(ch - c0) / count - d * d;
    if (var < 0.0) var = 0.0;
    mul[ch] = float(double(scale[ch]) / std::sqrt(var + double(eps)));
    mean_out[ch] = float(double(k[ch - c0]) + d);
    var_out[ch] = float(var);
  }
}

// The backward's sums over channels [c0, c1): dbias and dscale, and the
// factors of dx = f1 * dy + f2 * (x - mean) + f3.
void BackwardBlockSums(const float* x, const float* dy, const float* scale,
                       const float* mean, const float* var, float* f1,
                       float* f2, float* f3, float* dscale, float* dbias,
                       int n, int c, int hw, float eps, int c0, int c1) {
  const double count = double(n) * hw;
  BlockSums sums(c1 - c0);
  const int group = SampleGroup(hw);
  for (int i = 0; i < n; i += group) {
    const int segs = std::min(group, n - i);
    for (int ch = c0; ch < c1; ++ch) {
      const size_t off = (size_t(i) * c + ch) * hw;
      const float mu = mean[ch];
      sums.Add(
          ch - c0, segs, long(c) * hw, hw, dy + off, x + off,
          [](auto d, auto) { return d; },
          [mu](auto d, auto v) { return d * (v - mu); });
    }
    sums.Next(segs * hw);
  }
  sums.Flush();
  for (int ch = c0; ch < c1; ++ch) {
    const int k = ch - c0;
    const double sum_dy = sums.first(k), sum_dy_xmu = sums.second(k);
    const double invstd = 1.0 / std::sqrt(double(var[ch]) + double(eps));
    const double k1 = double(scale[ch]) * invstd;
    f1[ch] = float(k1);
    f2[ch] = float(-k1 * invstd * invstd * sum_dy_xmu / count);
    f3[ch] = float(-k1 * sum_dy / count);
    dbias[ch] = float(sum_dy);
    dscale[ch] = float(sum_dy_xmu * invstd);
  }
}

}  // namespace

void BatchNormForwardTraining(const float* x, const float* scale,
                              const float* bias, float* y, float* mean_out,
                              float* var_out, int n, int c, int hw,
                              float eps) {
  const long work = long(n) * c * hw;
  const int cb = BlockChannels(c, work);
  const int blocks = (c + cb - 1) / cb;
  Array<float> mul(c);
  const bool by_rows = RowOrderOutput(cb, hw, false);
#pragma omp parallel if (work > kParallelWork)
  {
#pragma omp for schedule(static)
    for (int blk = 0; blk < blocks; ++blk) {
      const int c0 = blk * cb, c1 = std::min(c, c0 + cb);
      BlockStatistics(x, scale, mean_out, var_out, mul.data(), n, c, hw, eps,
                      c0, c1);
      if (!by_rows)
        for (int i = 0; i < n; ++i)
          NormalizeRange(x, y, long(i) * c + c0, long(i) * c + c1, c, hw,
                         mean_out, mul.data(), bias);
    }
    if (by_rows) {
      // After the loop's barrier every channel's factors are known.
      const Range r = ThreadSegments(long(n) * c);
      NormalizeRange(x, y, r.k0, r.k1, c, hw, mean_out, mul.data(), bias);
    }
  }
}

void BatchNormForwardInference(const float* x, const float* scale,
                               const float* bias, const float* running_mean,
                               const float* running_var, float* y, int n,
                               int c, int hw, float eps) {
  const long work = long(n) * c * hw;
  Array<float> mul(c);
  for (int ch = 0; ch < c; ++ch)
    mul[ch] = float(double(scale[ch]) /
                    std::sqrt(double(running_var[ch]) + double(eps)));
  // One pass in memory order: (sample, channel) pairs are contiguous.
#pragma omp parallel if (work > kParallelWork)
  {
    const Range r = ThreadSegments(long(n) * c);
    NormalizeRange(x, y, r.k0, r.k1, c, hw, running_mean, mul.data(), bias);
  }
}

void BatchNormBackward(const float* x, const float* dy, const float* scale,
                       const float* mean, const float* var, float* dx,
                       float* dscale, float* dbias, int n, int c, int hw,
                       float eps, bool stream) {
  const long work = long(n) * c * hw;
  const int cb = BlockChannels(c, work);
  const int blocks = (c + cb - 1) / cb;
  // dx = g*invstd * (dy - mean(dy) - xhat * mean(dy*xhat)), regrouped per
  // channel as f1*dy + f2*(x - mu) + f3 so the last pass is one fused
  // expression.
  Array<float> f1(c), f2(c), f3(c);
  const bool by_rows = RowOrderOutput(cb, hw, true);
  // dx over the (sample, channel) segments [k0, k1), in memory order.
  auto gradient = [&](long k0, long k1) {
    int ch = int(k0 % c);
    for (long k = k0; k < k1; ++k) {
      const size_t off = size_t(k) * hw;
      const float* g = dy + off;
      const float* s = x + off;
      float* d = dx + off;
      const float mu = mean[ch], a = f1[ch], b = f2[ch], e = f3[ch];
      if (++ch == c) ch = 0;
      if (stream) {
        StreamRow(
            d, hw,
            [=](int j) { return a * Load(g + j) + b * (Load(s + j) - mu) + e; },
            [=](int j) { return a * g[j] + b * (s[j] - mu) + e; });
        continue;
      }
#pragma omp simd
      for (int j = 0; j < hw; ++j) d[j] = a * g[j] + b * (s[j] - mu) + e;
    }
  };
#pragma omp parallel if (work > kParallelWork)
  {
#pragma omp for schedule(static)
    for (int blk = 0; blk < blocks; ++blk) {
      const int c0 = blk * cb, c1 = std::min(c, c0 + cb);
      BackwardBlockSums(x, dy, scale, mean, var, f1.data(), f2.data(),
                        f3.data(), dscale, dbias, n, c, hw, eps, c0, c1);
      if (!by_rows)
        for (int i = 0; i < n; ++i)
          gradient(long(i) * c + c0, long(i) * c + c1);
    }
    if (by_rows) {
      // After the loop's barrier every channel's factors are known.
      const Range r = ThreadSegments(long(n) * c);
      gradient(r.k0, r.k1);
    }
    if (stream) StreamFence();
  }
}

}  // namespace SINGA_ISA_NS
}  // namespace cpu
}  // namespace singa
