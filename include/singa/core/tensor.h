// Tensor: shape, strides, offset, dtype and device over a shared Block.
// Reshape of a contiguous tensor, transpose, broadcast and slicing give views
// that share the Block; Contiguous() copies only when the layout needs it.
#ifndef SINGA_CORE_TENSOR_H_
#define SINGA_CORE_TENSOR_H_

#include <memory>
#include <string>
#include <vector>

#include "singa/core/common.h"
#include "singa/core/device.h"

namespace singa {

class Tensor {
 public:
  // An empty float32 tensor of shape () without storage on the default device.
  Tensor();
  explicit Tensor(const Shape& shape, std::shared_ptr<Device> device = nullptr,
                  DataType dtype = kFloat32);

  const Shape& shape() const { return shape_; }
  size_t shape(size_t i) const;
  size_t nDim() const { return shape_.size(); }
  size_t Size() const { return Product(shape_); }
  // Bytes of the tensor's elements (not of the whole Block).
  size_t MemSize() const { return Size() * SizeOf(dtype_); }
  const Strides& stride() const { return strides_; }
  size_t offset() const { return offset_; }
  DataType data_type() const { return dtype_; }
  const std::shared_ptr<Device>& device() const { return device_; }
  Block* block() const { return block_.get(); }
  bool empty() const { return block_ == nullptr; }
  // True when the elements are laid out row-major without gaps.
  bool IsContiguous() const;
  // True when the strides are not row-major (a transposed or permuted view).
  bool IsTransposed() const;

  // Address of the first element, whatever the dtype. Every element access
  // goes through these, so a Tensor without storage (default-constructed)
  // raises ValueError here instead of dereferencing a null Block.
  const void* raw_data() const {
    return static_cast<const char*>(CheckedBlock()->data()) + offset_ * SizeOf(dtype_);
  }
  void* mutable_raw_data() {
    return static_cast<char*>(CheckedBlock()->mutable_data()) + offset_ * SizeOf(dtype_);
  }
  template <typename T>
  const T* data() const {
    return static_cast<const T*>(CheckedBlock()->data()) + offset_;
  }
  template <typename T>
  T* mutable_data() {
    return static_cast<T*>(CheckedBlock()->mutable_data()) + offset_;
  }

  // Views (no copy). Reshape copies only when the layout cannot be viewed.
  Tensor Reshape(const Shape& shape) const;
  Tensor Transpose(const std::vector<size_t>& axes) const;
  Tensor Transpose() const;  // reverse all axes
  Tensor Broadcast(const Shape& shape) const;
  // A view with explicit shape, strides and offset (elements, from the start
  // of the Block); checked to stay inside the Block.
  Tensor View(const Shape& shape, const Strides& strides, size_t offset) const;
  // Elements [start, stop) with step along one axis, as a view.
  Tensor Slice(size_t axis, size_t start, size_t stop, size_t step = 1) const;

  Tensor Contiguous() const;
  Tensor Clone(std::shared_ptr<Device> device = nullptr) const;
  Tensor AsType(DataType dtype) const;
  void ToType(DataType dtype);
  void ToDevice(std::shared_ptr<Device> device);

  void SetValue(float x);
  // Copies src's values into this tensor (same element count; dtype converted).
  void CopyData(const Tensor& src);
  void CopyDataFromHostPtr(const void* src, size_t nbytes, size_t elem_offset = 0);
  void CopyDataToHostPtr(void* dst, size_t nbytes) const;

  void Gaussian(float mean, float std);
  void Uniform(float low, float high);
  void Bernoulli(float p);

  float L1() const;  // mean of |x| (SINGA: the 1-norm divided by the size)
  float L2() const;  // the 2-norm divided by the size, as in SINGA

 private:
  friend Tensor MakeView(const Tensor&, const Shape&, const Strides&, size_t);
  Block* CheckedBlock() const {
    if (!block_) ThrowNoStorage();
    return block_.get();
  }
  [[noreturn]] void ThrowNoStorage() const;
  Shape shape_;
  Strides strides_;
  size_t offset_ = 0;
  DataType dtype_ = kFloat32;
  std::shared_ptr<Device> device_;
  std::shared_ptr<Block> block_;
};

// Element-wise ops from ops.def: Abs(x), Add(a, b), AddScalar(a, s) for
// a + s, ScalarAdd(s, a) for s + a; the Into forms write into out, which
// must have the broadcast shape (it may be a view).
#define SINGA_UNARY_OP(Name, expr) \
  Tensor Name(const Tensor& x);    \
  void Name##Into(const Tensor& x, Tensor* out);
#define SINGA_BINARY_OP(Name, expr)                              \
  Tensor Name(const Tensor& a, const Tensor& b);                 \
  Tensor Name##Scalar(const Tensor& a, float s);                 \
  Tensor Scalar##Name(float s, const Tensor& a);                 \
  void Name##Into(const Tensor& a, const Tensor& b, Tensor* out); \
  void Name##ScalarInto(const Tensor& a, float s, Tensor* out);
#include "singa/core/ops.def"

// The names of the unary and of the binary ops in ops.def, in file order,
// separated by spaces: the Python op table (python/singa/opdefs.py) is
// checked against them.
const char* UnaryOpNames();
const char* BinaryOpNames();

// Shape of a and b broadcast together (ONNX multidirectional rules).
Shape BroadcastShape(const Shape& a, const Shape& b, const char* op);

Tensor Clip(const Tensor& x, float low, float high);
Tensor LeakyReLU(const Tensor& x, float alpha);
// cond ? a : b with broadcasting; cond is nonzero for true.
Tensor Where(const Tensor& cond, const Tensor& a, const Tensor& b);

// Reductions over the given axes (all axes when empty).
Tensor Sum(const Tensor& x, const std::vector<int>& axes, bool keepdims);
Tensor Mean(const Tensor& x, const std::vector<int>& axes, bool keepdims);
Tensor Max(const Tensor& x, const std::vector<int>& axes, bool keepdims);
Tensor Min(const Tensor& x, const std::vector<int>& axes, bool keepdims);
// Index of the largest / smallest element along one axis, as int32.
Tensor Argmax(const Tensor& x, int axis, bool keepdims);
Tensor Argmin(const Tensor& x, int axis, bool keepdims);
float SumAll(const Tensor& x);
// SINGA names: SumRows(M) adds the rows (result has M's columns),
// SumColumns(M) adds the columns (result has M's rows).
Tensor SumRows(const Tensor& m);
Tensor SumColumns(const Tensor& m);
// Numerically stable softmax / log-softmax along one axis.
Tensor SoftMax(const Tensor& x, int axis);
Tensor LogSoftMax(const Tensor& x, int axis);
// Softmax cross-entropy of (N, C) float32 scores x against N class labels
// (int32 or float32, shape (N,) or (N, 1)), fused for host devices:
// returns {loss, p}, where loss (shape (1,)) is the mean over rows of
// log-sum-exp(x_i) - x_i[label_i] and p the row softmax of x. A label
// below 0 or from C on throws IndexError, except while a graph records
// (labels unknown); a row whose label names no class (out of range, or a
// fraction) adds nothing to the loss and gets a zero p row, as a zero
// one-hot row would.
std::vector<Tensor> SoftmaxCrossEntropyLabels(const Tensor& x, const Tensor& labels);
// The gradient of that loss for x: dy[0] * (p - onehot(labels)) / N, with p
// from SoftmaxCrossEntropyLabels and dy a one-element float32 tensor.
Tensor SoftmaxCrossEntropyLabelsGrad(const Tensor& p, const Tensor& labels, const Tensor& dy);

// GEMM: alpha * a @ b + beta * c into c; a and b 2-D (transposed views are
// passed to BLAS without a copy).
void Mult(float alpha, const Tensor& a, const Tensor& b, float beta, Tensor* c);
// a @ b for 1-D or 2-D operands.
Tensor Mult(const Tensor& a, const Tensor& b);
// x @ w + b for x (batch, in), w (in, out) and b (out,), added to every
// row: the rows start as b and the GEMM adds to them.
Tensor LinearForward(const Tensor& x, const Tensor& w, const Tensor& b);
// NumPy matmul: batch dimensions broadcast.
Tensor Matmul(const Tensor& a, const Tensor& b);
// y += alpha * x.
void Axpy(float alpha, const Tensor& x, Tensor* y);
// y = alpha * x + beta * y, in one pass.
void Axpby(float alpha, const Tensor& x, float beta, Tensor* y);
// y += scale * alpha[0] * x, where alpha is a one-element float32 tensor on
// y's device read when the work runs (a learning rate that a schedule
// updates in place, so recorded graphs use its current value).
void AxpyTensor(float scale, const Tensor& alpha, const Tensor& x, Tensor* y);
// SGD with momentum, in place and in one pass over host float32 tensors
// (separate passes elsewhere), with the operations and order of Axpy,
// Axpby and AxpyTensor (a multiply and an add may fuse in either, so the
// two agree to about one unit in the last place, not bit for bit):
//   d = grad + weight_decay * param;  buf = momentum * buf + d;
//   param -= lr[0] * (nesterov ? d + momentum * buf : buf)
// lr is a one-element float32 tensor read when the work runs.
void SGDMomentumStep(const Tensor& lr, float momentum, float weight_decay, bool nesterov,
                     const Tensor& grad, Tensor* buf, Tensor* param);
// Adam, in place and in one pass over host float32 tensors (separate passes
// elsewhere), with those passes' operations and order (as SGDMomentumStep):
//   param *= decay[0]                      (AdamW; skipped when decay is empty)
//   d = grad + weight_decay * param;  m = beta_1 * m + (1 - beta_1) * d
//   v = beta_2 * v + (1 - beta_2) * d * d
//   param -= step_size[0] * m / (sqrt(v) * v_scale[0] + epsilon)
// step_size (lr / (1 - beta_1^t)), v_scale (1 / sqrt(1 - beta_2^t)) and
// decay are one-element float32 tensors read when the work runs.
void AdamStep(const Tensor& step_size, const Tensor& v_scale, const Tensor& decay, double beta_1,
              double beta_2, double epsilon, double weight_decay, const Tensor& grad, Tensor* m,
              Tensor* v, Tensor* param);
// RMSProp and AdaGrad, in place and in one pass over host float32 tensors
// (separate passes elsewhere), with those passes' operations and order (as
// SGDMomentumStep):
//   d = grad + weight_decay * param
//   RMSProp: running_average = rho * running_average + (1 - rho) * d * d
//   AdaGrad: history = history + d * d
//   param -= lr[0] * d / (sqrt(running_average or history) + epsilon)
void RMSPropStep(const Tensor& lr, double rho, double epsilon, double weight_decay,
                 const Tensor& grad, Tensor* running_average, Tensor* param);
void AdaGradStep(const Tensor& lr, double epsilon, double weight_decay, const Tensor& grad,
                 Tensor* history, Tensor* param);

Tensor ConcatOn(const std::vector<Tensor>& xs, int axis);
// NumPy repeat: one count for every element, or one count per element.
Tensor Repeat(const Tensor& x, const std::vector<size_t>& repeats, int axis);
Tensor Tile(const Tensor& x, const std::vector<size_t>& reps);
// The slices of x at positions idx (int32, any shape, negative counts from
// the end) along axis: shape[:axis] + idx.shape + shape[axis+1:].
Tensor IndexSelect(const Tensor& x, const Tensor& idx, int axis);
// dst[.., idx[i], ..] += src[.., i, ..] along axis; repeated positions add up.
void IndexAdd(Tensor* dst, const Tensor& idx, const Tensor& src, int axis);

// Normalises a possibly negative axis against ndim, or throws IndexError.
size_t NormAxis(int axis, size_t ndim, const char* op);
// Throws DeviceError unless all tensors are on the same device.
void CheckSameDevice(const char* op, const Tensor& a, const Tensor& b);

}  // namespace singa

#endif  // SINGA_CORE_TENSOR_H_
