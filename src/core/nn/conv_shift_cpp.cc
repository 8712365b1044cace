// The flat-shift paths (conv_shift.h): when Conv2dForward and
// Conv2dBackwardWeight (conv_cpp.cc) take them, and their split over
// threads. The per-image work runs in the copy of conv_shift_isa.cc
// compiled for the CPU's ISA family.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "singa/core/nn_kernels.h"

#include "conv_shift.h"
#include "conv_threads.h"

namespace singa {
namespace cpu {

namespace {

// ISA dispatch (SINGA_ISA_DISPATCH returns from its caller).
size_t ShiftWork(const ShiftJob& j) { SINGA_ISA_DISPATCH(ShiftWorkFloats(j)); }
void ClearShift(const ShiftJob& j, float* work) {
  SINGA_ISA_DISPATCH(ShiftClear(j, work));
}
void RunShift(const ShiftJob& j, int b, float* work) {
  SINGA_ISA_DISPATCH(ShiftImage(j, b, work));
}
size_t ShiftDwWork(const ShiftDwJob& j) {
  SINGA_ISA_DISPATCH(ShiftDwWorkFloats(j));
}
void ClearShiftDw(const ShiftDwJob& j, float* work) {
  SINGA_ISA_DISPATCH(ShiftDwClear(j, work));
}
void RunShiftDw(const ShiftDwJob& j, int b, float* work) {
  SINGA_ISA_DISPATCH(ShiftDwImage(j, b, work));
}
void FinishShiftDw(const ShiftDwJob& j, const float* work, float* dw) {
  SINGA_ISA_DISPATCH(ShiftDwFinish(j, work, dw));
}

ShiftMode& CurrentShiftMode() {
  static ShiftMode mode = PathModeFromEnv("SINGA_CONV_SHIFT");
  return mode;
}

ShiftPlane PlaneOf(const ConvParams& p) {
  return ShiftPlane{p.c,     p.h,     p.w,    p.oc,
                    p.kh,    p.kw,    p.pad_t, p.pad_l,
                    p.oh(),  p.ow(),  p.h + p.pad_t + p.pad_b,
                    p.w + p.pad_l + p.pad_r};
}

// Whether the flat-shift forward (or, with weight_gradient, the weight
// gradient) takes this layer.
bool UseShift(const ConvParams& p, int threads, bool weight_gradient) {
  const ShiftMode mode = CurrentShiftMode();
  if (mode == ShiftMode::kOff) return false;
  if (p.groups != 1 || p.sh != 1 || p.sw != 1 || p.dh != 1 || p.dw != 1 ||
      p.c * p.kh * p.kw > kShiftMaxK)
    return false;
  if (mode == ShiftMode::kForce) return true;
  // Measured on an AVX2 EPYC (Zen 4) at one thread against the implicit
  // GEMM: 1.13-2.7x faster on LeNet's first layer, RGB 3x3 stems, 5x5 and
  // 3x3 layers of 1 to 7 channels and 1x1 layers of 32 and 64, where at
  // least 4/5 of the wide columns are outputs (1.03x at exactly 4/5); 0.77x
  // at 2/3 (LeNet's 12x12 plane through 5x5). Threads take whole images, so the images must split
  // evenly or be several per thread.
  const int wp = p.w + p.pad_l + p.pad_r;
  if (5 * p.ow() < 4 * wp || (p.n % threads && p.n < 4 * threads)) return false;
  // 1x1 kernels, measured again on a Zen 5 EPYC (both kernel families,
  // one and two threads, batch 16-64, 32-64 input channels, planes of 4x4
  // to 32x32) against the implicit GEMM: the weight gradient took
  // 0.27-0.98x the time through the GEMM on planes under 32x32 (0.27 on
  // 4x4, 0.67-0.90 on 28x28), and 0.77-1.35x on 32x32 (AVX2 1.02-1.29x);
  // the forward 0.73-1.04x through the GEMM on 32x32, but 0.91-1.24x
  // (mostly over 1) on the smaller planes. So the weight gradient takes
  // this path from 32x32 on, the forward below it.
  if (p.kh == 1 && p.kw == 1) {
    const bool large = int64_t(p.oh()) * p.ow() >= 1024;
    if (weight_gradient != large) return false;
  }
  return true;
}

// Called with UseShift(p, threads, false): threads take whole images.
void ForwardShift(const float* x, const float* w, const float* b, float* y,
                  const ConvParams& p, int threads) {
  const ShiftJob job{PlaneOf(p), x, w, b, y};
  const size_t work = ShiftWork(job);
  threads = std::min(threads, p.n);
#pragma omp parallel num_threads(threads) if (threads > 1)
  {
    float* buf = ThreadWork(work);
    ClearShift(job, buf);
#pragma omp for schedule(static)
    for (int i = 0; i < p.n; ++i) RunShift(job, i, buf);
  }
}

// Called with UseShift(p, threads, true): each thread sums a contiguous range of images
// into its own lane sums; the threads' results are added in thread order.
void BackwardWeightShift(const float* x, const float* dy, float* dw,
                         const ConvParams& p, int threads) {
  const ShiftDwJob job{PlaneOf(p), x, dy, p.n};
  const size_t work = ShiftDwWork(job);
  const size_t count = size_t(p.oc) * p.c * p.kh * p.kw;
  threads = std::min(threads, p.n);
  if (threads == 1) {
    float* buf = ThreadWork(work);
    ClearShiftDw(job, buf);
    for (int i = 0; i < p.n; ++i) RunShiftDw(job, i, buf);
    FinishShiftDw(job, buf, dw);
    return;
  }
  std::vector<float> part(size_t(threads) * count, 0.f);
#pragma omp parallel num_threads(threads)
  {
    float* buf = ThreadWork(work);
    ClearShiftDw(job, buf);
#pragma omp for schedule(static)
    for (int i = 0; i < p.n; ++i) RunShiftDw(job, i, buf);
    FinishShiftDw(job, buf, part.data() + size_t(ThreadId()) * count);
  }
  std::copy(part.begin(), part.begin() + count, dw);
  for (int t = 1; t < threads; ++t)
    for (size_t k = 0; k < count; ++k) dw[k] += part[t * count + k];
}

}  // namespace

void SetShiftMode(ShiftMode mode) { CurrentShiftMode() = mode; }
ShiftMode GetShiftMode() { return CurrentShiftMode(); }

bool ShiftForward(const float* x, const float* w, const float* b, float* y,
                  const ConvParams& p) {
  const int threads = ThreadsFor(int64_t(p.n) * p.oc * p.oh() * p.ow() * p.c *
                                 p.kh * p.kw);
  if (!UseShift(p, threads, false)) return false;
  ForwardShift(x, w, b, y, p, threads);
  return true;
}

bool ShiftBackwardWeight(const float* x, const float* dy, float* dw,
                         const ConvParams& p) {
  // The forward's rule, but for 1x1 kernels (see UseShift): at one thread
  // on an AVX2 Zen 4 the flat-shift weight gradient ran 1.12-2.0x faster
  // than the NT engine on the same layers, except 0.95x for a 1x1 layer of
  // 64 channels on 8x8 planes.
  const int threads = ThreadsFor(int64_t(p.n) * p.oc * p.oh() * p.ow() * p.c *
                                 p.kh * p.kw);
  if (!UseShift(p, threads, true)) return false;
  BackwardWeightShift(x, dy, dw, p, threads);
  return true;
}

}  // namespace cpu
}  // namespace singa
