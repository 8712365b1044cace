// SINGA's layer kernels with their handles (ConvHandle, PoolingHandle,
// BatchNormHandle and the Cpu* functions of src/model/operation in Apache
// SINGA), as thin wrappers over the tensor-level kernels of nn.h. A handle
// records the geometry of a layer for one input shape; the Cpu* functions
// check that the tensors they get agree with it (typed errors naming the
// shapes) and call Conv2dForward etc. Paddings are symmetric, (h, w), as in
// SINGA; asymmetric ("odd") padding is applied by the Python caller.
#ifndef SINGA_CORE_MODEL_OPERATION_H_
#define SINGA_CORE_MODEL_OPERATION_H_

#include <vector>

#include "singa/core/tensor.h"

namespace singa {

class ConvHandle {
 public:
  ConvHandle(const Tensor& input, const std::vector<size_t>& kernel_size,
             const std::vector<size_t>& stride, const std::vector<size_t>& padding,
             size_t in_channels, size_t out_channels, bool bias, size_t groups = 1);

  size_t kernel_w, pad_w, stride_w;
  size_t kernel_h, pad_h, stride_h;
  size_t channels, num_filters, group;
  bool bias_term;
  size_t height, width, conv_height, conv_width;
  size_t batchsize;
  // im2col sizes, as SINGA's handle reports them.
  size_t col_height, col_width, imagesize;
};

Tensor CpuConvForward(const Tensor& x, Tensor& W, Tensor& b, const ConvHandle& ch);
Tensor CpuConvBackwardx(const Tensor& dy, Tensor& W, const Tensor& x, const ConvHandle& ch);
Tensor CpuConvBackwardW(const Tensor& dy, const Tensor& x, const Tensor& W,
                        const ConvHandle& ch);
Tensor CpuConvBackwardb(const Tensor& dy, const Tensor& b, const ConvHandle& ch);

class PoolingHandle {
 public:
  PoolingHandle(const Tensor& input, const std::vector<int>& kernel_size,
                const std::vector<int>& stride, const std::vector<int>& padding,
                bool is_max = true);

  int kernel_w, pad_w, stride_w;
  int kernel_h, pad_h, stride_h;
  int batchsize, channels, height, width;
  int pooled_height, pooled_width;
  bool is_max_pooling;
};

// Average pooling divides by the cells inside the input (padding is not
// counted), as ONNX AveragePool does by default.
Tensor CpuPoolingForward(const PoolingHandle& ph, const Tensor& x);
// y is accepted for SINGA's signature; max pooling finds the winners in x.
Tensor CpuPoolingBackward(const PoolingHandle& ph, const Tensor& dy, const Tensor& x,
                          const Tensor& y);

class BatchNormHandle {
 public:
  BatchNormHandle(float momentum, const Tensor& input);

  float factor;    // the momentum: running = factor * running + (1 - factor) * batch
  float epsilon;
  size_t batchsize, channels, height, width;
  bool is_2d;
};

Tensor CpuBatchNormForwardInference(const BatchNormHandle& bnh, const Tensor& x,
                                    const Tensor& bnScale, const Tensor& bnBias,
                                    Tensor& running_mean, Tensor& running_var);
// Returns {y, batch mean, biased batch variance} and blends the batch
// statistics into running_mean and running_var in place.
std::vector<Tensor> CpuBatchNormForwardTraining(const BatchNormHandle& bnh, const Tensor& x,
                                                const Tensor& bnScale, const Tensor& bnBias,
                                                Tensor& running_mean, Tensor& running_var);
// Returns {dx, dscale, dbias}; mean and var are those forward training
// returned.
std::vector<Tensor> CpuBatchNormBackwardx(const BatchNormHandle& bnh, const Tensor& y,
                                          const Tensor& dy, const Tensor& x,
                                          const Tensor& bnScale, const Tensor& bnBias,
                                          const Tensor& mean, const Tensor& var);

}  // namespace singa

#endif  // SINGA_CORE_MODEL_OPERATION_H_
