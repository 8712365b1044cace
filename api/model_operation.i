// SINGA's layer kernels with their handles (see singa/core/model_operation.h):
// ConvHandle, PoolingHandle, BatchNormHandle and the Cpu* functions, under
// SINGA's names and argument orders. The handles' fields are read-only here:
// a handle describes one input geometry; make a new one for another.
%{
#include "singa/core/model_operation.h"
%}

%feature("immutable");
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
  size_t col_height, col_width, imagesize;
};

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

class BatchNormHandle {
 public:
  BatchNormHandle(float momentum, const Tensor& input);
  float factor;
  float epsilon;
  size_t batchsize, channels, height, width;
  bool is_2d;
};

}  // namespace singa
%feature("immutable", "");

namespace singa {

Tensor CpuConvForward(const Tensor& x, Tensor& W, Tensor& b, const ConvHandle& ch);
Tensor CpuConvBackwardx(const Tensor& dy, Tensor& W, const Tensor& x, const ConvHandle& ch);
Tensor CpuConvBackwardW(const Tensor& dy, const Tensor& x, const Tensor& W,
                        const ConvHandle& ch);
Tensor CpuConvBackwardb(const Tensor& dy, const Tensor& b, const ConvHandle& ch);

Tensor CpuPoolingForward(const PoolingHandle& ph, const Tensor& x);
Tensor CpuPoolingBackward(const PoolingHandle& ph, const Tensor& dy, const Tensor& x,
                          const Tensor& y);

Tensor CpuBatchNormForwardInference(const BatchNormHandle& bnh, const Tensor& x,
                                    const Tensor& bnScale, const Tensor& bnBias,
                                    Tensor& running_mean, Tensor& running_var);
std::vector<Tensor> CpuBatchNormForwardTraining(const BatchNormHandle& bnh, const Tensor& x,
                                                const Tensor& bnScale, const Tensor& bnBias,
                                                Tensor& running_mean, Tensor& running_var);
std::vector<Tensor> CpuBatchNormBackwardx(const BatchNormHandle& bnh, const Tensor& y,
                                          const Tensor& dy, const Tensor& x,
                                          const Tensor& bnScale, const Tensor& bnBias,
                                          const Tensor& mean, const Tensor& var);

}  // namespace singa
