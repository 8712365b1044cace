// Convolution, pooling and batch norm on CTensors (see singa/core/nn.h).
%{
#include "singa/core/nn.h"
%}

namespace singa {

Tensor Conv2dForward(const Tensor& x, const Tensor& w, const Tensor& b,
                     const std::vector<int>& stride, const std::vector<int>& pads,
                     const std::vector<int>& dilation, int groups);
Tensor Conv2dBackwardData(const Tensor& dy, const Tensor& w, const std::vector<size_t>& x_shape,
                          const std::vector<int>& stride, const std::vector<int>& pads,
                          const std::vector<int>& dilation, int groups);
Tensor Conv2dBackwardWeight(const Tensor& x, const Tensor& dy, const std::vector<size_t>& w_shape,
                            const std::vector<int>& stride, const std::vector<int>& pads,
                            const std::vector<int>& dilation, int groups);
std::vector<Tensor> MaxPool2dForward(const Tensor& x, const std::vector<int>& kernel,
                                     const std::vector<int>& stride,
                                     const std::vector<int>& pads,
                                     const std::vector<int>& dilation, bool ceil_mode);
Tensor MaxPool2dBackward(const Tensor& dy, const Tensor& argmax,
                         const std::vector<size_t>& x_shape, const std::vector<int>& kernel,
                         const std::vector<int>& stride, const std::vector<int>& pads,
                         const std::vector<int>& dilation, bool ceil_mode);
Tensor AvgPool2dForward(const Tensor& x, const std::vector<int>& kernel,
                        const std::vector<int>& stride, const std::vector<int>& pads,
                        bool ceil_mode, bool count_include_pad);
Tensor AvgPool2dBackward(const Tensor& dy, const std::vector<size_t>& x_shape,
                         const std::vector<int>& kernel, const std::vector<int>& stride,
                         const std::vector<int>& pads, bool ceil_mode, bool count_include_pad);
std::vector<Tensor> BatchNormForwardTraining(const Tensor& x, const Tensor& scale,
                                             const Tensor& bias, float eps);
Tensor BatchNormForwardInference(const Tensor& x, const Tensor& scale, const Tensor& bias,
                                 const Tensor& running_mean, const Tensor& running_var,
                                 float eps);
std::vector<Tensor> BatchNormBackward(const Tensor& x, const Tensor& dy, const Tensor& scale,
                                      const Tensor& mean, const Tensor& var, float eps);

}  // namespace singa
