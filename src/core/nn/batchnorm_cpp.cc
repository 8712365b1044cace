// Batch normalisation: argument checks; the loops are in batchnorm_isa.cc,
// compiled per ISA family.
#include <cmath>
#include <cstddef>
#include <sstream>
#include <stdexcept>
#include <string>

#include "singa/core/nn_kernels.h"

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

}  // namespace

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
                                       dbias, n, c, hw, eps));
}

}  // namespace cpu
}  // namespace singa
