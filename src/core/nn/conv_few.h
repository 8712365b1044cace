// Convolution gradients over few pixels (conv_few_cpp.cc), where the
// implicit-GEMM forms of conv_cpp.cc have too few columns to amortise their
// rows: a deep layer's small planes at a small batch (512 channels on a 4x4
// plane at batch 1).
#ifndef SINGA_SRC_CORE_NN_CONV_FEW_H_
#define SINGA_SRC_CORE_NN_CONV_FEW_H_

#include "singa/core/nn_kernels.h"

namespace singa {
namespace cpu {

// wf[c][m][t] = w[m][c][kk - 1 - t]: each kernel of w [oc][c][kk] flipped
// in both axes, with the channel axes swapped (the kernel a data gradient
// correlates dy with).
void FlipSwapKernels(const float* w, int oc, int c, int kk, float* wf);

// dx as the forward pass of dy (padded by k - 1 - p) with the kernel
// flipped and its channel axes swapped, for stride-1, undilated,
// ungrouped layers with many input channels on few pixels of dx; returns
// false (dx untouched) for any other call.
bool FewPixelsBackwardData(const float* dy, const float* w, float* dx,
                           const ConvParams& p);

// dw as one small GEMM of dy and the windows of x, the pixels being its
// reduction, for ungrouped layers with few output pixels in the whole
// batch; returns false (dw untouched) for any other call.
bool FewPixelsBackwardWeight(const float* x, const float* dy, float* dw,
                             const ConvParams& p);

}  // namespace cpu
}  // namespace singa

#endif  // SINGA_SRC_CORE_NN_CONV_FEW_H_
