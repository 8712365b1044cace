// Tensor and the tensor-level functions. Host copies go through the Python
// buffer protocol, so NumPy arrays pass without the NumPy C API.

%{
// Takes a C-contiguous buffer from o, turning the buffer protocol's own
// errors (BufferError for a read-only target, ValueError for a strided
// one) into TypeError for a non-buffer and ValueError naming the problem.
static int SingaGetBuffer(PyObject* o, Py_buffer* view, bool writable, const char* fn) {
  if (!PyObject_CheckBuffer(o)) {
    PyErr_Format(PyExc_TypeError, "%s: expected a buffer (a NumPy array, bytes or "
                 "memoryview), got %s", fn, Py_TYPE(o)->tp_name);
    return 0;
  }
  int flags = PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0);
  if (PyObject_GetBuffer(o, view, flags) == 0) return 1;
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  PyErr_Format(PyExc_ValueError, "%s: the %s buffer must be C-contiguous%s (%S)", fn,
               Py_TYPE(o)->tp_name, writable ? " and writable" : "",
               value ? value : Py_None);
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(tb);
  return 0;
}
%}

// A read-only contiguous buffer: numpy arrays, bytes, memoryviews.
%typemap(in) (const void* src, size_t nbytes) (Py_buffer view) {
  view.obj = NULL;
  if (!SingaGetBuffer($input, &view, false, "$symname")) SWIG_fail;
  $1 = view.buf;
  $2 = static_cast<size_t>(view.len);
}
%typemap(freearg) (const void* src, size_t nbytes) {
  if (view$argnum.obj) PyBuffer_Release(&view$argnum);
}
// A writable contiguous buffer that receives a tensor's elements.
%typemap(in) (void* dst, size_t nbytes) (Py_buffer view) {
  view.obj = NULL;
  if (!SingaGetBuffer($input, &view, true, "$symname")) SWIG_fail;
  $1 = view.buf;
  $2 = static_cast<size_t>(view.len);
}
%typemap(freearg) (void* dst, size_t nbytes) {
  if (view$argnum.obj) PyBuffer_Release(&view$argnum);
}

// A Tensor returned by value moves into the Python object (no second copy
// of its shape and strides per op).
%typemap(out) singa::Tensor %{
  $result = SWIG_NewPointerObj(new singa::Tensor(std::move($1)), $descriptor(singa::Tensor *),
                               SWIG_POINTER_OWN);
%}

namespace singa {

enum DataType { kFloat32 = 0, kFloat16 = 1, kInt = 2, kChar = 3, kDouble = 4 };

class Tensor {
 public:
  Tensor();
  Tensor(const std::vector<size_t>& shape, std::shared_ptr<Device> device = nullptr,
         DataType dtype = kFloat32);

  const std::vector<size_t>& shape() const;
  size_t shape(size_t i) const;
  size_t nDim() const;
  size_t Size() const;
  size_t MemSize() const;
  const std::vector<int64_t>& stride() const;
  size_t offset() const;
  DataType data_type() const;
  std::shared_ptr<Device> device() const;
  bool empty() const;
  bool IsContiguous() const;
  bool IsTransposed() const;

  Tensor Reshape(const std::vector<size_t>& shape) const;
  Tensor Transpose(const std::vector<size_t>& axes) const;
  Tensor Transpose() const;
  Tensor Broadcast(const std::vector<size_t>& shape) const;
  Tensor View(const std::vector<size_t>& shape, const std::vector<int64_t>& strides,
              size_t offset) const;
  Tensor Slice(size_t axis, size_t start, size_t stop, size_t step = 1) const;
  Tensor Contiguous() const;
  Tensor Clone(std::shared_ptr<Device> device = nullptr) const;
  Tensor AsType(DataType dtype) const;
  void ToType(DataType dtype);
  void ToDevice(std::shared_ptr<Device> device);

  void SetValue(float x);
  void CopyData(const Tensor& src);
  void CopyDataFromHostPtr(const void* src, size_t nbytes, size_t elem_offset = 0);
  void CopyDataToHostPtr(void* dst, size_t nbytes) const;

  void Gaussian(float mean, float std);
  void Uniform(float low, float high);
  void Bernoulli(float p);
  float L1() const;
  float L2() const;
};

}  // namespace singa

// SINGA's name for IsTransposed, kept for scripts that call it on a CTensor.
%extend singa::Tensor {
  bool transpose() const { return $self->IsTransposed(); }
}

%template(VecTensor) std::vector<singa::Tensor>;

// These names also take SINGA's extra arguments (Add(lhs, rhs, ret),
// SoftMax(t, out), Axpy with a tensor alpha): compat_tensor.i declares each
// as one function with optional arguments instead, since SWIG's overload
// dispatch would append its list of overloads to a TypeError raised inside.
%ignore singa::Add(const Tensor&, const Tensor&);
%ignore singa::Sub(const Tensor&, const Tensor&);
%ignore singa::Div(const Tensor&, const Tensor&);
%ignore singa::SoftMax(const Tensor&, int);
%ignore singa::Axpy(float, const Tensor&, Tensor*);

namespace singa {

#define SINGA_UNARY_OP(Name, expr)       \
  Tensor Name(const Tensor& x);          \
  void Name##Into(const Tensor& x, Tensor* out);
#define SINGA_BINARY_OP(Name, expr)                               \
  Tensor Name(const Tensor& a, const Tensor& b);                  \
  Tensor Name##Scalar(const Tensor& a, float s);                  \
  Tensor Scalar##Name(float s, const Tensor& a);                  \
  void Name##Into(const Tensor& a, const Tensor& b, Tensor* out); \
  void Name##ScalarInto(const Tensor& a, float s, Tensor* out);
%include "singa/core/ops.def"
const char* UnaryOpNames();
const char* BinaryOpNames();

Tensor Clip(const Tensor& x, float low, float high);
Tensor LeakyReLU(const Tensor& x, float alpha);
Tensor Where(const Tensor& cond, const Tensor& a, const Tensor& b);

Tensor Sum(const Tensor& x, const std::vector<int>& axes, bool keepdims);
Tensor Mean(const Tensor& x, const std::vector<int>& axes, bool keepdims);
Tensor Max(const Tensor& x, const std::vector<int>& axes, bool keepdims);
Tensor Min(const Tensor& x, const std::vector<int>& axes, bool keepdims);
Tensor Argmax(const Tensor& x, int axis, bool keepdims);
Tensor Argmin(const Tensor& x, int axis, bool keepdims);
float SumAll(const Tensor& x);
Tensor SumRows(const Tensor& m);
Tensor SumColumns(const Tensor& m);
Tensor SoftMax(const Tensor& x, int axis);
Tensor LogSoftMax(const Tensor& x, int axis);
std::vector<Tensor> SoftmaxCrossEntropyLabels(const Tensor& x, const Tensor& labels);
Tensor SoftmaxCrossEntropyLabelsGrad(const Tensor& p, const Tensor& labels, const Tensor& dy);

void Mult(float alpha, const Tensor& a, const Tensor& b, float beta, Tensor* c);
Tensor Mult(const Tensor& a, const Tensor& b);
Tensor Matmul(const Tensor& a, const Tensor& b);
Tensor LinearForward(const Tensor& x, const Tensor& w, const Tensor& b);
void Axpy(float alpha, const Tensor& x, Tensor* y);
void Axpby(float alpha, const Tensor& x, float beta, Tensor* y);
void AxpyTensor(float scale, const Tensor& alpha, const Tensor& x, Tensor* y);
void SGDMomentumStep(const Tensor& lr, float momentum, float weight_decay, bool nesterov,
                     const Tensor& grad, Tensor* buf, Tensor* param);
void AdamStep(const Tensor& step_size, const Tensor& v_scale, const Tensor& decay, double beta_1,
              double beta_2, double epsilon, double weight_decay, const Tensor& grad, Tensor* m,
              Tensor* v, Tensor* param);
void RMSPropStep(const Tensor& lr, double rho, double epsilon, double weight_decay,
                 const Tensor& grad, Tensor* running_average, Tensor* param);
void AdaGradStep(const Tensor& lr, double epsilon, double weight_decay, const Tensor& grad,
                 Tensor* history, Tensor* param);

Tensor ConcatOn(const std::vector<Tensor>& xs, int axis);
Tensor Repeat(const Tensor& x, const std::vector<size_t>& repeats, int axis);
Tensor Tile(const Tensor& x, const std::vector<size_t>& reps);
Tensor IndexSelect(const Tensor& x, const Tensor& idx, int axis);
void IndexAdd(Tensor* dst, const Tensor& idx, const Tensor& src, int axis);

}  // namespace singa
