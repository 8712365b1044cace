// Tensor-level convolution, pooling and batch norm (NCHW, float32). These
// check shapes, dtypes and devices, make inputs contiguous and call the
// kernels of nn_kernels.h. Spatial parameters are (h, w) pairs; pads are
// (top, left, bottom, right).
#ifndef SINGA_CORE_NN_H_
#define SINGA_CORE_NN_H_

#include <vector>

#include "singa/core/tensor.h"

namespace singa {

// b may be an empty Tensor() for no bias.
Tensor Conv2dForward(const Tensor& x, const Tensor& w, const Tensor& b,
                     const std::vector<int>& stride, const std::vector<int>& pads,
                     const std::vector<int>& dilation, int groups);
Tensor Conv2dBackwardData(const Tensor& dy, const Tensor& w, const Shape& x_shape,
                          const std::vector<int>& stride, const std::vector<int>& pads,
                          const std::vector<int>& dilation, int groups);
Tensor Conv2dBackwardWeight(const Tensor& x, const Tensor& dy, const Shape& w_shape,
                            const std::vector<int>& stride, const std::vector<int>& pads,
                            const std::vector<int>& dilation, int groups);

// Returns {y, argmax}; argmax (int32) indexes each input plane.
std::vector<Tensor> MaxPool2dForward(const Tensor& x, const std::vector<int>& kernel,
                                     const std::vector<int>& stride,
                                     const std::vector<int>& pads,
                                     const std::vector<int>& dilation, bool ceil_mode);
Tensor MaxPool2dBackward(const Tensor& dy, const Tensor& argmax, const Shape& x_shape,
                         const std::vector<int>& kernel, const std::vector<int>& stride,
                         const std::vector<int>& pads, const std::vector<int>& dilation,
                         bool ceil_mode);
Tensor AvgPool2dForward(const Tensor& x, const std::vector<int>& kernel,
                        const std::vector<int>& stride, const std::vector<int>& pads,
                        bool ceil_mode, bool count_include_pad);
Tensor AvgPool2dBackward(const Tensor& dy, const Shape& x_shape,
                         const std::vector<int>& kernel, const std::vector<int>& stride,
                         const std::vector<int>& pads, bool ceil_mode,
                         bool count_include_pad);

// x is (N, C) or (N, C, ...); statistics are per channel (axis 1).
// Returns {y, batch mean, biased batch variance}.
std::vector<Tensor> BatchNormForwardTraining(const Tensor& x, const Tensor& scale,
                                             const Tensor& bias, float eps);
Tensor BatchNormForwardInference(const Tensor& x, const Tensor& scale, const Tensor& bias,
                                 const Tensor& running_mean, const Tensor& running_var,
                                 float eps);
// Returns {dx, dscale, dbias}.
std::vector<Tensor> BatchNormBackward(const Tensor& x, const Tensor& dy, const Tensor& scale,
                                      const Tensor& mean, const Tensor& var, float eps);

}  // namespace singa

#endif  // SINGA_CORE_NN_H_
