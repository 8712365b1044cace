// Convolution gradients over few pixels (see conv_few.h). Their scratch is
// the drivers' slot 2 (conv_threads.h): the forward pass that the data
// gradient calls may use slots 0 and 1 itself.
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "singa/core/nn_kernels.h"

#include "../tensor/gemm_small.h"
#include "conv_few.h"
#include "conv_threads.h"

namespace singa {
namespace cpu {

namespace {

// Pixels of dx up to which a stride-1 data gradient runs as a forward pass
// (DataAsForward) rather than conv_dx_cpp.cc's scatter form, whose rows (the
// input channels' taps) are many and whose columns (pixels) are then too
// few to amortise them: 512 channels on a 4x4 plane took 0.2-0.5x the
// time at batch 1 to 4 (AVX2 EPYC, the weights' rearrangement included).
// The forward form's rows are the input channels: with fewer than
// kAsForwardMinC of them (LeNet's 20) its register tiles stay part empty.
constexpr int64_t kAsForwardMaxPixels = 256;
constexpr int kAsForwardMinC = 64;

bool TakesDataAsForward(const ConvParams& p) {
  return p.groups == 1 && p.c >= kAsForwardMinC && p.sh == 1 && p.sw == 1 &&
         p.dh == 1 && p.dw == 1 &&
         p.kh * p.kw > 1 && std::max(p.pad_t, p.pad_b) < p.kh &&
         std::max(p.pad_l, p.pad_r) < p.kw &&
         int64_t(p.n) * p.h * p.w <= kAsForwardMaxPixels;
}

// dx of a stride-1 convolution is the forward convolution of dy, padded by
// k - 1 - p on each side, with w flipped in both axes and its channel axes
// swapped.
void DataAsForward(const float* dy, const float* w, float* dx,
                   const ConvParams& p) {
  const int kk = p.kh * p.kw;
  float* wf = ThreadWork(size_t(p.c) * p.oc * kk, 2);
  FlipSwapKernels(w, p.oc, p.c, kk, wf);
  ConvParams q = p;
  q.c = p.oc;
  q.h = p.oh();
  q.w = p.ow();
  q.oc = p.c;
  q.pad_t = p.kh - 1 - p.pad_t;
  q.pad_b = p.kh - 1 - p.pad_b;
  q.pad_l = p.kw - 1 - p.pad_l;
  q.pad_r = p.kw - 1 - p.pad_r;
  q.w_stamp = 0;
  Conv2dForward(dy, wf, nullptr, dx, q);
}

// Output pixels of the whole batch up to which the weight gradient is a
// product with a short reduction: the lane-wise dot products of the NT
// kernels need long rows to pay for adding up their lanes, and ran at
// 7-15% of the FMA peak on 16 pixels (a 4x4 output at batch 1).
constexpr int64_t kFewPixels = 64;

// dw = dy * windows^T with the R = n * oh * ow pixels as the reduction:
// dy copied to [oc][R], the windows of x to [R][c * kh * kw] (zero in the
// padding), and one small GEMM over the threads.
void BackwardWeightFewPixels(const float* x, const float* dy, float* dw,
                             const ConvParams& p) {
  const int oh = p.oh(), ow = p.ow();
  const int64_t P = int64_t(oh) * ow, R = p.n * P;
  const int kk = p.kh * p.kw, K = p.c * kk;
  float* a = ThreadWork(size_t(p.oc) * R + size_t(R) * K, 2);
  float* b = a + int64_t(p.oc) * R;
  for (int img = 0; img < p.n; ++img)
    for (int m = 0; m < p.oc; ++m)
      std::copy(dy + (int64_t(img) * p.oc + m) * P, dy + (int64_t(img) * p.oc + m + 1) * P,
                a + m * R + img * P);
  for (int64_t r = 0; r < R; ++r) {
    const int img = int(r / P), oy = int(r % P / ow), ox = int(r % ow);
    float* row = b + r * K;
    for (int c = 0; c < p.c; ++c) {
      const float* plane = x + (int64_t(img) * p.c + c) * p.h * p.w;
      for (int ki = 0; ki < p.kh; ++ki) {
        const int iy = oy * p.sh - p.pad_t + ki * p.dh;
        for (int kj = 0; kj < p.kw; ++kj) {
          const int ix = ox * p.sw - p.pad_l + kj * p.dw;
          *row++ = iy >= 0 && iy < p.h && ix >= 0 && ix < p.w
                       ? plane[int64_t(iy) * p.w + ix]
                       : 0.f;
        }
      }
    }
  }
  SmallGemmThreads(false, false, p.oc, K, R, 1.f, a, R, b, K, 0.f, dw, K);
}

}  // namespace

void FlipSwapKernels(const float* w, int oc, int c, int kk, float* wf) {
  // A few output channels at a time over all input channels: the reads are
  // that many sequential streams through w, the writes runs of kT kernels;
  // the common kernel sizes unrolled.
  constexpr int kT = 8;
  const int mb = (oc + kT - 1) / kT;
  auto flip = [&](auto taps) {
    constexpr int kTaps = decltype(taps)::value;
    const int n = kTaps ? kTaps : kk;
#pragma omp parallel for schedule(static) if (int64_t(c) * oc * kk > kParallelMacs)
    for (int blk = 0; blk < mb; ++blk) {
      const int m0 = blk * kT, m1 = std::min(oc, m0 + kT);
      for (int ci = 0; ci < c; ++ci)
        for (int m = m0; m < m1; ++m) {
          const float* src = w + (int64_t(m) * c + ci) * n;
          float* dst = wf + (int64_t(ci) * oc + m) * n;
          for (int t = 0; t < n; ++t) dst[t] = src[n - 1 - t];
        }
    }
  };
  if (kk == 9)
    flip(std::integral_constant<int, 9>());
  else if (kk == 25)
    flip(std::integral_constant<int, 25>());
  else
    flip(std::integral_constant<int, 0>());
}

bool FewPixelsBackwardData(const float* dy, const float* w, float* dx,
                           const ConvParams& p) {
  if (!TakesDataAsForward(p)) return false;
  DataAsForward(dy, w, dx, p);
  return true;
}

bool FewPixelsBackwardWeight(const float* x, const float* dy, float* dw,
                             const ConvParams& p) {
  if (p.groups != 1 || int64_t(p.n) * p.oh() * p.ow() > kFewPixels) return false;
  BackwardWeightFewPixels(x, dy, dw, p);
  return true;
}

}  // namespace cpu
}  // namespace singa
