// Batch normalisation: argument checks; the loops are in batchnorm_isa.cc,
// compiled per ISA family.
#include <cmath>
#include <cstddef>
#include <sstream>
#include <stdexcept>
#include <string>

#include "singa/core/nn_kernels.h"

#include "batchnorm.h"
#include "nn_isa.h"

namespace singa {
namespace cpu {

namespace {

void CheckArgs(const char* fn, int n, int c, int hw, float eps) {
  if (n > 0 && c > 0 && hw > 0 && eps >= 0.f && std::isfinite(eps)) return;
  std::ostringstream os;
  os << fn << ": input [n=" << n << ", c=" << c << ", hw=" << hw
     << "], eps=" << eps
     << ": sizes must be positive and eps finite and non-negative";
  throw std::invalid_argument(os.str());
}

BnStreamMode& CurrentStreamMode() {
  static BnStreamMode mode = PathModeFromEnv("SINGA_BN_STREAM");
  return mode;
}

// Whether the backward writes dx with non-temporal stores. Measured on an
// AVX2 EPYC (Zen 4, 32 MiB L3) at batch 64: with x, dy and dx at 48 MiB
// (64 channels of 32x32) the backward took 0.8x the time at 1 thread and
// 0.65-0.9x at 2, and at 24 MiB (128 of 16x16) 0.65-0.75x at 1 thread and
// about the same at 2; at 12 MiB (256 of 8x8) it was as fast at 1 thread
// and 1.4x slower at 2, where dx and the next pass's inputs still fit in
// L3 and a cached store is cheaper than one to memory.
bool StreamDx(int n, int c, int hw) {
  const BnStreamMode mode = CurrentStreamMode();
  if (mode != BnStreamMode::kAuto) return mode == BnStreamMode::kForce;
  return 3 * sizeof(float) * size_t(n) * size_t(c) * size_t(hw) >=
         kBnStreamBytes;
}

}  // namespace

void SetBnStreamMode(BnStreamMode mode) { CurrentStreamMode() = mode; }
BnStreamMode GetBnStreamMode() { return CurrentStreamMode(); }

void BatchNormForwardTraining(const float* x, const float* scale,
                              const float* bias, float* y, float* mean_out,
                              float* var_out, int n, int c, int hw,
                              float eps) {
  CheckArgs("BatchNormForwardTraining", n, c, hw, eps);
  SINGA_ISA_DISPATCH(BatchNormForwardTraining(x, scale, bias, y, mean_out,
                                              var_out, n, c, hw, eps));
}

void BatchNormForwardInference(const float* x, const float* scale,
                               const float* bias, const float* running_mean,
                               const float* running_var, float* y, int n,
                               int c, int hw, float eps) {
  CheckArgs("BatchNormForwardInference", n, c, hw, eps);
  SINGA_ISA_DISPATCH(BatchNormForwardInference(
      x, scale, bias, running_mean, running_var, y, n, c, hw, eps));
}

void BatchNormBackward(const float* x, const float* dy, const float* scale,
                       const float* mean, const float* var, float* dx,
                       float* dscale, float* dbias, int n, int c, int hw,
                       float eps) {
  CheckArgs("BatchNormBackward", n, c, hw, eps);
  SINGA_ISA_DISPATCH(BatchNormBackward(x, dy, scale, mean, var, dx, dscale,
                                       dbias, n, c, hw, eps,
                                       StreamDx(n, c, hw)));
}

}  // namespace cpu
}  // namespace singa
