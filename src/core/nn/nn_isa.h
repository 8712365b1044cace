// The pooling and batch-norm loops compiled once per ISA family
// (pool_isa.cc, batchnorm_isa.cc; see cpu_isa.h). pool_cpp.cc and
// batchnorm_cpp.cc check the arguments and call the family the CPU runs.
#ifndef SINGA_SRC_CORE_NN_NN_ISA_H_
#define SINGA_SRC_CORE_NN_NN_ISA_H_

#include <cstdint>

#include "singa/core/cpu_isa.h"
#include "singa/core/nn_kernels.h"

namespace singa {
namespace cpu {

// What a pooling call needs beyond PoolParams, computed once per call.
struct PoolPlan {
  int oh, ow;
  // Per kernel column kj: input offset of the tap relative to ox * sw, and
  // the output columns [lo, hi) for which it lands inside the row.
  const int* off;
  const int* lo;
  const int* hi;
  // Average pooling divisor of output (oy, ox) is rows[oy] * cols[ox] (null
  // for max pooling).
  const int* rows;
  const int* cols;
};

SINGA_ISA_DECLARE(
    void MaxPoolForward(const float* x, float* y, int32_t* argmax,
                        const PoolParams& p, const PoolPlan& pl);
    size_t MaxPoolBackward(const float* dy, const int32_t* argmax, float* dx,
                           const PoolParams& p, const PoolPlan& pl);
    void AvgPoolForward(const float* x, float* y, const PoolParams& p,
                        const PoolPlan& pl);
    void AvgPoolBackward(const float* dy, float* dx, const PoolParams& p,
                         const PoolPlan& pl);
    void BatchNormForwardTraining(const float* x, const float* scale,
                                  const float* bias, float* y, float* mean_out,
                                  float* var_out, int n, int c, int hw,
                                  float eps);
    void BatchNormForwardInference(const float* x, const float* scale,
                                   const float* bias, const float* running_mean,
                                   const float* running_var, float* y, int n,
                                   int c, int hw, float eps);
    void BatchNormBackward(const float* x, const float* dy, const float* scale,
                           const float* mean, const float* var, float* dx,
                           float* dscale, float* dbias, int n, int c, int hw,
                           float eps, bool stream);)

}  // namespace cpu
}  // namespace singa

#endif  // SINGA_SRC_CORE_NN_NN_ISA_H_
