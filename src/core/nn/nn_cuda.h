// CUDA kernels for convolution, pooling and batch norm, with the contracts
// of the CPU kernels in nn_kernels.h (same layouts, same parameters, same
// results up to float rounding), queued on the context's stream. Parameters
// were validated before (nn.cc); nothing here checks user input.
//
// Convolution is im2col (a chunk of images at a time, in the context's
// workspace) plus cuBLAS GEMM; 1x1 convolutions with stride 1 and no
// padding skip im2col in the forward and data-gradient passes.
#ifndef SINGA_SRC_CORE_NN_NN_CUDA_H_
#define SINGA_SRC_CORE_NN_NN_CUDA_H_

#include <cstdint>

#include "singa/core/device.h"
#include "singa/core/nn_kernels.h"

namespace singa {
namespace gpu {

void Conv2dForward(const float* x, const float* w, const float* b, float* y,
                   const cpu::ConvParams& p, Context* ctx);
void Conv2dBackwardData(const float* dy, const float* w, float* dx, const cpu::ConvParams& p,
                        Context* ctx);
void Conv2dBackwardWeight(const float* x, const float* dy, float* dw, const cpu::ConvParams& p,
                          Context* ctx);

void MaxPool2dForward(const float* x, float* y, int32_t* argmax, const cpu::PoolParams& p,
                      Context* ctx);
void MaxPool2dBackward(const float* dy, const int32_t* argmax, float* dx,
                       const cpu::PoolParams& p, Context* ctx);
void AvgPool2dForward(const float* x, float* y, const cpu::PoolParams& p, Context* ctx);
void AvgPool2dBackward(const float* dy, float* dx, const cpu::PoolParams& p, Context* ctx);

void BatchNormForwardTraining(const float* x, const float* scale, const float* bias, float* y,
                              float* mean_out, float* var_out, int n, int c, int hw, float eps,
                              Context* ctx);
void BatchNormForwardInference(const float* x, const float* scale, const float* bias,
                               const float* running_mean, const float* running_var, float* y,
                               int n, int c, int hw, float eps, Context* ctx);
void BatchNormBackward(const float* x, const float* dy, const float* scale, const float* mean,
                       const float* var, float* dx, float* dscale, float* dbias, int n, int c,
                       int hw, float eps, Context* ctx);

}  // namespace gpu
}  // namespace singa

#endif  // SINGA_SRC_CORE_NN_NN_CUDA_H_
