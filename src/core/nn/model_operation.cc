// SINGA's handle-based layer kernels over the tensor-level kernels of nn.h.
// Every check runs before the first kernel is queued (doc/design.md, Exec
// contract), so a mismatch leaves running statistics untouched.
#include "singa/core/model_operation.h"

#include <cmath>
#include <cstdint>

#include "singa/core/nn.h"

namespace singa {

namespace {

std::vector<size_t> Two(const std::vector<size_t>& v, const char* op, const char* what) {
  SINGA_CHECK(v.size() == 2, ValueError, op, ": ", what, " needs 2 values (h, w), got ",
              v.size());
  return v;
}

std::vector<int> Two(const std::vector<int>& v, const char* op, const char* what) {
  SINGA_CHECK(v.size() == 2, ValueError, op, ": ", what, " needs 2 values (h, w), got ",
              v.size());
  return v;
}

void CheckNCHW(const char* op, const Tensor& x, const char* what) {
  SINGA_CHECK(x.nDim() == 4, ShapeError, op, ": ", what, " must be 4-D NCHW, got shape ",
              x.shape());
}

// x must be (any batch, channels, height, width): the handle was made for
// that image size.
void CheckImage(const char* op, const Tensor& x, size_t channels, size_t height, size_t width,
                const char* what) {
  CheckNCHW(op, x, what);
  SINGA_CHECK(x.shape()[1] == channels && x.shape()[2] == height && x.shape()[3] == width,
              ShapeError, op, ": ", what, " of shape ", x.shape(),
              " does not match the handle, made for (N, ", channels, ", ", height, ", ",
              width, ")");
}

std::vector<int> ConvStride(const ConvHandle& ch) {
  return {static_cast<int>(ch.stride_h), static_cast<int>(ch.stride_w)};
}

std::vector<int> ConvPads(const ConvHandle& ch) {
  int ph = static_cast<int>(ch.pad_h), pw = static_cast<int>(ch.pad_w);
  return {ph, pw, ph, pw};
}

void CheckConvWeight(const char* op, const Tensor& W, const ConvHandle& ch) {
  Shape want = {ch.num_filters, ch.channels / ch.group, ch.kernel_h, ch.kernel_w};
  SINGA_CHECK(W.shape() == want, ShapeError, op, ": weight of shape ", W.shape(),
              " does not match the handle's ", want);
}

void CheckConvGrad(const char* op, const Tensor& dy, const ConvHandle& ch) {
  CheckNCHW(op, dy, "gradient");
  SINGA_CHECK(dy.shape()[1] == ch.num_filters && dy.shape()[2] == ch.conv_height &&
                  dy.shape()[3] == ch.conv_width,
              ShapeError, op, ": gradient of shape ", dy.shape(),
              " does not match the handle's output (N, ", ch.num_filters, ", ",
              ch.conv_height, ", ", ch.conv_width, ")");
}

std::vector<int> PoolKernel(const PoolingHandle& ph) { return {ph.kernel_h, ph.kernel_w}; }
std::vector<int> PoolStride(const PoolingHandle& ph) { return {ph.stride_h, ph.stride_w}; }
std::vector<int> PoolPads(const PoolingHandle& ph) {
  return {ph.pad_h, ph.pad_w, ph.pad_h, ph.pad_w};
}

void CheckBnInput(const char* op, const BatchNormHandle& bnh, const Tensor& x) {
  SINGA_CHECK(x.nDim() >= 2 && x.shape()[1] == bnh.channels, ShapeError, op, ": input of shape ",
              x.shape(), " does not have the handle's ", bnh.channels, " channels on axis 1");
}

void CheckRunning(const char* op, const BatchNormHandle& bnh, const Tensor& x, const Tensor& t,
                  const char* what) {
  SINGA_CHECK(t.data_type() == kFloat32, DtypeError, op, ": ", what, " must be float32, got ",
              DataTypeName(t.data_type()));
  CheckSameDevice(op, x, t);
  SINGA_CHECK(t.Size() == bnh.channels, ShapeError, op, ": ", what, " of shape ", t.shape(),
              " does not match ", bnh.channels, " channels");
}

}  // namespace

ConvHandle::ConvHandle(const Tensor& input, const std::vector<size_t>& kernel_size,
                       const std::vector<size_t>& stride, const std::vector<size_t>& padding,
                       size_t in_channels, size_t out_channels, bool bias, size_t groups) {
  const char* op = "ConvHandle";
  CheckNCHW(op, input, "input");
  auto k = Two(kernel_size, op, "kernel_size");
  auto s = Two(stride, op, "stride");
  auto p = Two(padding, op, "padding");
  SINGA_CHECK(k[0] >= 1 && k[1] >= 1 && s[0] >= 1 && s[1] >= 1, ValueError, op,
              ": kernel_size ", kernel_size, " and stride ", stride, " must be positive");
  const size_t kMax = 0x7fffffff;  // the kernels take int sizes
  SINGA_CHECK(k[0] <= kMax && k[1] <= kMax && s[0] <= kMax && s[1] <= kMax && p[0] <= kMax &&
                  p[1] <= kMax && out_channels <= kMax,
              ValueError, op, ": kernel_size ", kernel_size, ", stride ", stride, ", padding ",
              padding, " and out_channels ", out_channels, " must fit an int");
  SINGA_CHECK(in_channels == input.shape()[1], ShapeError, op, ": in_channels ", in_channels,
              " does not match input shape ", input.shape());
  SINGA_CHECK(groups >= 1 && in_channels % groups == 0 && out_channels % groups == 0 &&
                  out_channels >= 1,
              ValueError, op, ": ", in_channels, " input and ", out_channels,
              " output channels cannot be split into ", groups, " groups");
  batchsize = input.shape()[0];
  channels = in_channels;
  num_filters = out_channels;
  group = groups;
  bias_term = bias;
  height = input.shape()[2];
  width = input.shape()[3];
  kernel_h = k[0];
  kernel_w = k[1];
  stride_h = s[0];
  stride_w = s[1];
  pad_h = p[0];
  pad_w = p[1];
  SINGA_CHECK(height + 2 * pad_h >= kernel_h && width + 2 * pad_w >= kernel_w, ShapeError, op,
              ": kernel_size ", kernel_size, " does not fit input shape ", input.shape(),
              " with padding ", padding);
  conv_height = (height + 2 * pad_h - kernel_h) / stride_h + 1;
  conv_width = (width + 2 * pad_w - kernel_w) / stride_w + 1;
  col_height = in_channels * kernel_w * kernel_h;
  col_width = conv_height * conv_width;
  imagesize = channels * height * width;
}

Tensor CpuConvForward(const Tensor& x, Tensor& W, Tensor& b, const ConvHandle& ch) {
  const char* op = "CpuConvForward";
  CheckImage(op, x, ch.channels, ch.height, ch.width, "input");
  CheckConvWeight(op, W, ch);
  if (ch.bias_term)
    SINGA_CHECK(b.Size() == ch.num_filters, ShapeError, op, ": bias of shape ", b.shape(),
                " does not match ", ch.num_filters, " filters");
  return Conv2dForward(x, W, ch.bias_term ? b : Tensor(), ConvStride(ch), ConvPads(ch), {1, 1},
                       static_cast<int>(ch.group));
}

Tensor CpuConvBackwardx(const Tensor& dy, Tensor& W, const Tensor& x, const ConvHandle& ch) {
  const char* op = "CpuConvBackwardx";
  CheckImage(op, x, ch.channels, ch.height, ch.width, "input");
  CheckConvWeight(op, W, ch);
  CheckConvGrad(op, dy, ch);
  return Conv2dBackwardData(dy, W, x.shape(), ConvStride(ch), ConvPads(ch), {1, 1},
                            static_cast<int>(ch.group));
}

Tensor CpuConvBackwardW(const Tensor& dy, const Tensor& x, const Tensor& W,
                        const ConvHandle& ch) {
  const char* op = "CpuConvBackwardW";
  CheckImage(op, x, ch.channels, ch.height, ch.width, "input");
  CheckConvWeight(op, W, ch);
  CheckConvGrad(op, dy, ch);
  return Conv2dBackwardWeight(x, dy, W.shape(), ConvStride(ch), ConvPads(ch), {1, 1},
                              static_cast<int>(ch.group));
}

Tensor CpuConvBackwardb(const Tensor& dy, const Tensor& b, const ConvHandle& ch) {
  const char* op = "CpuConvBackwardb";
  CheckConvGrad(op, dy, ch);
  SINGA_CHECK(b.Size() == ch.num_filters, ShapeError, op, ": bias of shape ", b.shape(),
              " does not match ", ch.num_filters, " filters");
  return Sum(dy, {0, 2, 3}, false).Reshape(b.shape());
}

PoolingHandle::PoolingHandle(const Tensor& input, const std::vector<int>& kernel_size,
                             const std::vector<int>& stride, const std::vector<int>& padding,
                             bool is_max) {
  const char* op = "PoolingHandle";
  CheckNCHW(op, input, "input");
  auto k = Two(kernel_size, op, "kernel_size");
  auto s = Two(stride, op, "stride");
  auto p = Two(padding, op, "padding");
  SINGA_CHECK(k[0] >= 1 && k[1] >= 1 && s[0] >= 1 && s[1] >= 1 && p[0] >= 0 && p[1] >= 0,
              ValueError, op, ": kernel_size ", kernel_size, " and stride ", stride,
              " must be positive and padding ", padding, " non-negative");
  const Shape& xs = input.shape();
  SINGA_CHECK(xs[0] <= 0x7fffffff && xs[1] <= 0x7fffffff && xs[2] <= 0x7fffffff &&
                  xs[3] <= 0x7fffffff,
              ShapeError, op, ": input shape ", xs, " is too large");
  batchsize = static_cast<int>(xs[0]);
  channels = static_cast<int>(xs[1]);
  height = static_cast<int>(xs[2]);
  width = static_cast<int>(xs[3]);
  kernel_h = k[0];
  kernel_w = k[1];
  stride_h = s[0];
  stride_w = s[1];
  pad_h = p[0];
  pad_w = p[1];
  is_max_pooling = is_max;
  // 64-bit, so no padding a script passes can overflow
  const int64_t span_h = int64_t(height) + 2 * int64_t(pad_h) - kernel_h;
  const int64_t span_w = int64_t(width) + 2 * int64_t(pad_w) - kernel_w;
  SINGA_CHECK(span_h >= 0 && span_w >= 0, ShapeError, op, ": kernel_size ", kernel_size,
              " does not fit input shape ", xs, " with padding ", padding);
  SINGA_CHECK(span_h / stride_h < 0x7fffffff && span_w / stride_w < 0x7fffffff, ValueError, op,
              ": padding ", padding, " gives an output too large");
  pooled_height = static_cast<int>(span_h / stride_h + 1);
  pooled_width = static_cast<int>(span_w / stride_w + 1);
}

Tensor CpuPoolingForward(const PoolingHandle& ph, const Tensor& x) {
  const char* op = "CpuPoolingForward";
  CheckImage(op, x, ph.channels, ph.height, ph.width, "input");
  if (ph.is_max_pooling)
    return MaxPool2dForward(x, PoolKernel(ph), PoolStride(ph), PoolPads(ph), {1, 1}, false)[0];
  return AvgPool2dForward(x, PoolKernel(ph), PoolStride(ph), PoolPads(ph), false, false);
}

Tensor CpuPoolingBackward(const PoolingHandle& ph, const Tensor& dy, const Tensor& x,
                          const Tensor& y) {
  const char* op = "CpuPoolingBackward";
  CheckImage(op, x, ph.channels, ph.height, ph.width, "input");
  CheckNCHW(op, dy, "gradient");
  SINGA_CHECK(dy.shape()[0] == x.shape()[0] && dy.shape()[1] == x.shape()[1] &&
                  dy.shape()[2] == static_cast<size_t>(ph.pooled_height) &&
                  dy.shape()[3] == static_cast<size_t>(ph.pooled_width),
              ShapeError, op, ": gradient of shape ", dy.shape(), " does not match the output (",
              x.shape()[0], ", ", x.shape()[1], ", ", ph.pooled_height, ", ", ph.pooled_width,
              ") of input ", x.shape());
  (void)y;
  if (ph.is_max_pooling) {
    Tensor argmax =
        MaxPool2dForward(x, PoolKernel(ph), PoolStride(ph), PoolPads(ph), {1, 1}, false)[1];
    return MaxPool2dBackward(dy, argmax, x.shape(), PoolKernel(ph), PoolStride(ph),
                             PoolPads(ph), {1, 1}, false);
  }
  return AvgPool2dBackward(dy, x.shape(), PoolKernel(ph), PoolStride(ph), PoolPads(ph), false,
                           false);
}

BatchNormHandle::BatchNormHandle(float momentum, const Tensor& input) {
  const char* op = "BatchNormHandle";
  SINGA_CHECK(std::isfinite(momentum), ValueError, op, ": momentum must be finite, got ",
              momentum);
  SINGA_CHECK(input.nDim() >= 2, ShapeError, op,
              ": input must be at least 2-D (N, C, ...), got shape ", input.shape());
  factor = momentum;
  epsilon = 1e-5f;
  const Shape& xs = input.shape();
  batchsize = xs[0];
  channels = xs[1];
  is_2d = xs.size() == 2;
  height = xs.size() > 2 ? xs[2] : 1;
  width = 1;
  for (size_t i = 3; i < xs.size(); ++i) width *= xs[i];
}

Tensor CpuBatchNormForwardInference(const BatchNormHandle& bnh, const Tensor& x,
                                    const Tensor& bnScale, const Tensor& bnBias,
                                    Tensor& running_mean, Tensor& running_var) {
  const char* op = "CpuBatchNormForwardInference";
  CheckBnInput(op, bnh, x);
  return BatchNormForwardInference(x, bnScale, bnBias, running_mean, running_var, bnh.epsilon);
}

std::vector<Tensor> CpuBatchNormForwardTraining(const BatchNormHandle& bnh, const Tensor& x,
                                                const Tensor& bnScale, const Tensor& bnBias,
                                                Tensor& running_mean, Tensor& running_var) {
  const char* op = "CpuBatchNormForwardTraining";
  CheckBnInput(op, bnh, x);
  CheckRunning(op, bnh, x, running_mean, "running mean");
  CheckRunning(op, bnh, x, running_var, "running var");
  std::vector<Tensor> out = BatchNormForwardTraining(x, bnScale, bnBias, bnh.epsilon);
  MulScalarInto(running_mean, bnh.factor, &running_mean);
  Axpy(1.f - bnh.factor, out[1].Reshape(running_mean.shape()), &running_mean);
  MulScalarInto(running_var, bnh.factor, &running_var);
  Axpy(1.f - bnh.factor, out[2].Reshape(running_var.shape()), &running_var);
  return out;
}

std::vector<Tensor> CpuBatchNormBackwardx(const BatchNormHandle& bnh, const Tensor& y,
                                          const Tensor& dy, const Tensor& x,
                                          const Tensor& bnScale, const Tensor& bnBias,
                                          const Tensor& mean, const Tensor& var) {
  const char* op = "CpuBatchNormBackwardx";
  CheckBnInput(op, bnh, x);
  (void)y;
  (void)bnBias;
  return BatchNormBackward(x, dy, bnScale, mean, var, bnh.epsilon);
}

}  // namespace singa
