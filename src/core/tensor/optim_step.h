// The element loops of the fused optimizer steps (tensor_optim.cc), compiled
// once per ISA family (optim_step_isa.cc; see cpu_isa.h): at the baseline's
// four lanes Adam's square root and division held it to 2.2 cycles per
// element on one AVX2 EPYC core, at eight lanes 1.0.
#ifndef SINGA_SRC_CORE_TENSOR_OPTIM_STEP_H_
#define SINGA_SRC_CORE_TENSOR_OPTIM_STEP_H_

#include <cstdint>

#include "singa/core/cpu_isa.h"

namespace singa {
namespace cpu {

struct SgdArgs {
  const float* g;
  float* b;
  float* p;
  float momentum, weight_decay, k, km;  // k = -lr, km = -momentum * lr
  bool nesterov;
};

struct AdamArgs {
  const float* g;
  float* m;
  float* v;
  float* p;
  // c1 = 1 - beta_1, c2 = 1 - beta_2, k = -step_size; scale multiplies p
  // first when `scaled` (AdamW's decoupled decay).
  float b1, c1, b2, c2, eps, weight_decay, k, v_scale, scale;
  bool scaled;
};

// RMSProp (keep = rho, add = 1 - rho) and AdaGrad (keep = add = 1):
// s = add * d * d + keep * s, p += k * d / (sqrt(s) + eps).
struct RmsArgs {
  const float* g;
  float* s;
  float* p;
  float keep, add, eps, weight_decay, k;  // k = -lr
};

// Elements [lo, hi) of one step: the separate element-wise passes'
// operations in their order (under the families' flags a multiply and an
// add may be fused here, as they may be in those passes).
SINGA_ISA_DECLARE(void SgdSpan(const SgdArgs& a, int64_t lo, int64_t hi);
                  void AdamSpan(const AdamArgs& a, int64_t lo, int64_t hi);
                  void RmsSpan(const RmsArgs& a, int64_t lo, int64_t hi);)

}  // namespace cpu
}  // namespace singa

#endif  // SINGA_SRC_CORE_TENSOR_OPTIM_STEP_H_
