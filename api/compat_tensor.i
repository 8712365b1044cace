// SINGA's C++ tensor API names (apache/singa src/api/core_tensor.i) as thin
// wrappers over singa's functions, so that scripts calling singa_wrap
// directly run unchanged. Every wrapper checks its arguments first and
// throws singa's typed errors: a SINGA name never aborts on bad input.
//
// Names that overload one of singa's (Sum(t, axis), Mult(A, B, C), ...)
// are declared in namespace singa; the others live in singa::sw. Add, Sub,
// Div, SoftMax and Axpy with SINGA's extra arguments are one function each
// (end of this file). Values cross to NumPy through the buffer protocol;
// NumPy itself is imported on first use, by the functions that return arrays.

%template(VecVecSize) std::vector<std::vector<size_t>>;

// %runtime: the Tensor and Device extensions below are emitted where the
// classes are declared (core_*.i), before any %{ %} block of this file.
%runtime %{
#include "singa/core/tensor.h"
#include <cfloat>
#include <climits>
#include <cstdint>
#include <string>
#include <vector>

namespace singa {
namespace sw {

void CheckGiven(const Tensor* t, const char* fn, const char* what) {
  SINGA_CHECK(t != nullptr, ValueError, fn, ": ", what, " must be a Tensor, got None");
}

void CheckSameShape(const char* fn, const Tensor& a, const Tensor& b) {
  SINGA_CHECK(a.shape() == b.shape(), ShapeError, fn, ": shapes ", a.shape(), " and ",
              b.shape(), " differ");
}

// ---- host values (NumPy) ----

PyObject* Numpy() {
  static PyObject* np = nullptr;
  if (!np) np = PyImport_ImportModule("numpy");
  return np;
}

// obj as a new C-contiguous 1-D NumPy array of dtype dt, converted when
// NumPy's same_kind rule allows it (float64 -> float32, int64 -> int32);
// NULL with TypeError set otherwise.
PyObject* HostArray(PyObject* obj, const char* dt, const char* fn) {
  PyObject* np = Numpy();
  if (!np) return nullptr;
  PyObject* arr = PyObject_CallMethod(np, "asarray", "O", obj);
  if (!arr) return nullptr;
  PyObject* from = PyObject_GetAttrString(arr, "dtype");
  PyObject* ok =
      from ? PyObject_CallMethod(np, "can_cast", "Oss", from, dt, "same_kind") : nullptr;
  PyObject* out = nullptr;
  if (ok == Py_True) {
    PyObject* c = PyObject_CallMethod(np, "ascontiguousarray", "Os", arr, dt);
    if (c) {
      out = PyObject_CallMethod(c, "reshape", "i", -1);
      Py_DECREF(c);
    }
  } else if (ok) {
    PyErr_Format(PyExc_TypeError, "%s: cannot copy %S values into a tensor of dtype %s", fn,
                 from, dt);
  }
  Py_XDECREF(ok);
  Py_XDECREF(from);
  Py_DECREF(arr);
  return out;
}

// t.CopyFloatDataFromHostPtr(array, offset) and its int / half forms.
PyObject* CopyFromHost(Tensor* t, PyObject* src, int64_t offset, DataType dt,
                       const char* dtname, const char* fn) {
  SINGA_CHECK(t->data_type() == dt, DtypeError, fn, ": the tensor holds ",
              DataTypeName(t->data_type()), ", not ", DataTypeName(dt));
  SINGA_CHECK(offset >= 0, ValueError, fn, ": offset must be >= 0, got ", offset);
  SINGA_CHECK(!t->empty(), ValueError, fn, ": the tensor has no storage");
  PyObject* arr = HostArray(src, dtname, fn);
  if (!arr) return nullptr;
  Py_buffer view;
  if (PyObject_GetBuffer(arr, &view, PyBUF_C_CONTIGUOUS) != 0) {
    Py_DECREF(arr);
    return nullptr;
  }
  const size_t n = static_cast<size_t>(view.len) / SizeOf(dt);
  try {
    SINGA_CHECK(static_cast<unsigned long long>(offset) <= t->Size() &&
                    n <= t->Size() - static_cast<size_t>(offset),
                ValueError, fn, ": ", n, " values at offset ", offset,
                " do not fit a tensor of shape ", t->shape(), " (", t->Size(), " elements)");
    t->CopyDataFromHostPtr(view.buf, static_cast<size_t>(view.len), static_cast<size_t>(offset));
  } catch (...) {
    PyBuffer_Release(&view);
    Py_DECREF(arr);
    throw;
  }
  PyBuffer_Release(&view);
  Py_DECREF(arr);
  Py_RETURN_NONE;
}

// The first num values of t in row-major order, as a NumPy array.
PyObject* GetValues(const Tensor& t, int64_t num, DataType dt, const char* dtname,
                    const char* fn) {
  SINGA_CHECK(t.data_type() == dt, DtypeError, fn, ": the tensor holds ",
              DataTypeName(t.data_type()), ", not ", DataTypeName(dt));
  SINGA_CHECK(!t.empty(), ValueError, fn, ": the tensor has no storage");
  SINGA_CHECK(num >= 0 && static_cast<unsigned long long>(num) <= t.Size(), ValueError, fn,
              ": asked for ", num, " values of a tensor of shape ", t.shape(), " (", t.Size(),
              " elements)");
  Tensor part = t;
  if (num > 0) part = t.Contiguous().Reshape({t.Size()}).Slice(0, 0, static_cast<size_t>(num));
  PyObject* np = Numpy();
  if (!np) return nullptr;
  PyObject* arr = PyObject_CallMethod(np, "empty", "Ls", static_cast<long long>(num), dtname);
  if (!arr || num == 0) return arr;
  Py_buffer view;
  if (PyObject_GetBuffer(arr, &view, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) != 0) {
    Py_DECREF(arr);
    return nullptr;
  }
  try {
    part.CopyDataToHostPtr(view.buf, static_cast<size_t>(view.len));
  } catch (...) {
    PyBuffer_Release(&view);
    Py_DECREF(arr);
    throw;
  }
  PyBuffer_Release(&view);
  return arr;
}

// ---- shapes, copies, repeats ----

// SINGA's Product: the product of shape[start:end], where end is len, or
// the whole shape when len is 0.
size_t Product(const std::vector<size_t>& shape, int64_t start = 0, int64_t len = 0) {
  const int64_t n = static_cast<int64_t>(shape.size());
  const int64_t end = len == 0 ? n : len;
  SINGA_CHECK(start >= 0 && start <= end && end <= n, IndexError, "Product: range [", start,
              ", ", end, ") does not fit shape ", shape);
  size_t p = 1;
  for (int64_t i = start; i < end; ++i) p *= shape[static_cast<size_t>(i)];
  return p;
}

// Bytes per element of SINGA's dtype codes (kChar and kDouble included).
int SizeOf(int dtype) {
  switch (dtype) {
    case kFloat32:
    case kInt:
      return 4;
    case kFloat16:
      return 2;
    case kChar:
      return 1;
    case kDouble:
      return 8;
    default:
      SINGA_THROW(DtypeError, "SizeOf: unknown dtype code ", dtype,
                  " (SINGA's codes are 0 to 4: kFloat32, kFloat16, kInt, kChar, kDouble)");
  }
}

// num elements of src from src_offset into dst at dst_offset (row-major).
void CopyDataToFrom(Tensor* dst, const Tensor& src, int64_t num, int64_t src_offset = 0,
                    int64_t dst_offset = 0) {
  const char* fn = "CopyDataToFrom";
  CheckGiven(dst, fn, "dst");
  SINGA_CHECK(num >= 0 && src_offset >= 0 && dst_offset >= 0, ValueError, fn,
              ": num and offsets must be >= 0, got ", num, ", ", src_offset, ", ", dst_offset);
  const auto n = static_cast<unsigned long long>(num);
  const auto so = static_cast<unsigned long long>(src_offset);
  const auto dof = static_cast<unsigned long long>(dst_offset);
  SINGA_CHECK(so <= src.Size() && n <= src.Size() - so, ValueError, fn, ": ", num,
              " elements from offset ", src_offset, " reach past the end of shape ", src.shape());
  SINGA_CHECK(dof <= dst->Size() && n <= dst->Size() - dof, ValueError, fn, ": ", num,
              " elements at offset ", dst_offset, " reach past the end of shape ", dst->shape());
  SINGA_CHECK(dst->IsContiguous(), ValueError, fn, ": destination of shape ", dst->shape(),
              " is not contiguous");
  if (num == 0) return;
  Tensor d = dst->Reshape({dst->Size()}).Slice(0, dof, dof + n);
  Tensor s = src.Reshape({src.Size()}).Slice(0, so, so + n);
  d.CopyData(s);
}

// SINGA's axis value for "the flattened tensor" in repeat.
constexpr int kNoAxis = 9999;

Tensor RepeatAlong(const Tensor& src, const std::vector<size_t>& repeats, int axis) {
  if (axis == kNoAxis) return singa::Repeat(src.Reshape({src.Size()}), repeats, 0);
  return singa::Repeat(src, repeats, axis);
}

void CheckTotalRepeats(const char* fn, const Tensor& src, const std::vector<size_t>& repeats,
                       int axis, int64_t total) {
  const size_t len = axis == kNoAxis ? src.Size() : src.shape(NormAxis(axis, src.nDim(), fn));
  unsigned long long want = 0;
  if (repeats.size() == 1) {
    want = static_cast<unsigned long long>(repeats[0]) * len;
  } else {
    for (size_t r : repeats) want += r;
  }
  SINGA_CHECK(total >= 0 && static_cast<unsigned long long>(total) == want, ValueError, fn,
              ": total_repeats ", total, " does not match repeats ", repeats, " (", want, ")");
}

void RepeatDataToFrom(bool broadcast_flag, const std::vector<size_t>& repeats, int axis,
                      Tensor* dst, const Tensor& src, int64_t num) {
  const char* fn = "RepeatDataToFrom";
  CheckGiven(dst, fn, "dst");
  SINGA_CHECK(!broadcast_flag || repeats.size() == 1, ValueError, fn,
              ": broadcast_flag needs one repeat count, got ", repeats);
  Tensor r = RepeatAlong(src, repeats, axis);
  SINGA_CHECK(num >= 0 && static_cast<unsigned long long>(num) == r.Size() &&
                  r.Size() <= dst->Size(),
              ValueError, fn, ": num ", num, " does not match the ", r.Size(),
              " repeated elements, or they do not fit shape ", dst->shape());
  CopyDataToFrom(dst, r, num);
}

Tensor SliceOn(const Tensor& in, int64_t start, int64_t end, int axis) {
  const size_t ax = NormAxis(axis, in.nDim(), "SliceOn");
  const int64_t len = static_cast<int64_t>(in.shape(ax));
  SINGA_CHECK(start >= 0 && start <= end && end <= len, IndexError, "SliceOn: [", start, ", ",
              end, ") is out of range for axis ", axis, " of shape ", in.shape());
  return in.Slice(ax, static_cast<size_t>(start), static_cast<size_t>(end)).Clone();
}

Tensor ShapeReshape(const Tensor& in, const std::vector<size_t>& shape) {
  return in.Reshape(shape);
}
Tensor ShapeContiguous(const Tensor& in) { return in.Contiguous(); }
Tensor ShapeTranspose(const Tensor& in, const std::vector<size_t>& axes) {
  return in.Transpose(axes);
}
Tensor ShapeTranspose(const Tensor& in) { return in.Transpose(); }
Tensor ShapeDefaultTranspose(const Tensor& in) { return in.Transpose(); }

// ---- math under SINGA's names ----

Tensor ReLUBackward(const Tensor& dy, const Tensor& x) {
  CheckSameShape("ReLUBackward", dy, x);
  return Mul(dy, GreaterScalar(x, 0.f));
}

// dx for y = softmax along axis, from dy and y.
Tensor SoftMaxBackward(const Tensor& dy, int axis, const Tensor& y) {
  CheckSameShape("SoftMaxBackward", dy, y);
  const int ax = static_cast<int>(NormAxis(axis, y.nDim(), "SoftMaxBackward"));
  Tensor dot = Sum(Mul(dy, y), {ax}, true);
  return Mul(y, Sub(dy, dot));
}

Tensor Average(const Tensor& t, int axis) { return Mean(t, {axis}, false); }
float SumAsFloat(const Tensor& t) { return SumAll(t); }

Tensor OpAdd(const Tensor& a, const Tensor& b) { return Add(a, b); }
Tensor OpSub(const Tensor& a, const Tensor& b) { return Sub(a, b); }
Tensor OpMul(const Tensor& a, const Tensor& b) { return Mul(a, b); }
Tensor OpDiv(const Tensor& a, const Tensor& b) { return Div(a, b); }
Tensor OpLt(const Tensor& a, const Tensor& b) { return Less(a, b); }
Tensor OpLe(const Tensor& a, const Tensor& b) { return LessEqual(a, b); }
Tensor OpGt(const Tensor& a, const Tensor& b) { return Greater(a, b); }
Tensor OpGe(const Tensor& a, const Tensor& b) { return GreaterEqual(a, b); }
Tensor OpEq(const Tensor& a, const Tensor& b) { return Equal(a, b); }
Tensor LTFloat(const Tensor& t, float x) { return LessScalar(t, x); }
Tensor LEFloat(const Tensor& t, float x) { return LessEqualScalar(t, x); }
Tensor GTFloat(const Tensor& t, float x) { return GreaterScalar(t, x); }
Tensor GEFloat(const Tensor& t, float x) { return GreaterEqualScalar(t, x); }
Tensor EQFloat(const Tensor& t, float x) { return EqualScalar(t, x); }
Tensor AddFloat(const Tensor& t, float x) { return AddScalar(t, x); }
Tensor SubFloat(const Tensor& t, float x) { return SubScalar(t, x); }
Tensor MultFloat(const Tensor& t, float x) { return MulScalar(t, x); }
Tensor DivFloat(const Tensor& t, float x) { return DivScalar(t, x); }
Tensor PowFloat(const Tensor& t, float x) { return PowScalar(t, x); }
Tensor oplt(const Tensor& t, float x) { return LessScalar(t, x); }
Tensor ople(const Tensor& t, float x) { return LessEqualScalar(t, x); }
Tensor opgt(const Tensor& t, float x) { return GreaterScalar(t, x); }
Tensor opge(const Tensor& t, float x) { return GreaterEqualScalar(t, x); }
Tensor opeq(const Tensor& t, float x) { return EqualScalar(t, x); }
Tensor opadd(const Tensor& t, float x) { return AddScalar(t, x); }
Tensor opsub(const Tensor& t, float x) { return SubScalar(t, x); }
Tensor opmul(const Tensor& t, float x) { return MulScalar(t, x); }
Tensor opdiv(const Tensor& t, float x) { return DivScalar(t, x); }

Tensor EltwiseMult(const Tensor& a, const Tensor& b) { return Mul(a, b); }
void EltwiseMult(const Tensor& a, const Tensor& b, Tensor* ret) {
  CheckGiven(ret, "EltwiseMult", "ret");
  MulInto(a, b, ret);
}
void PowWithRet(const Tensor& base, const Tensor& exp, Tensor* out) {
  CheckGiven(out, "PowWithRet", "out");
  PowInto(base, exp, out);
}
void PowFloatWithRet(const Tensor& t, float x, Tensor* out) {
  CheckGiven(out, "PowFloatWithRet", "out");
  PowScalarInto(t, x, out);
}
void AddFloatWithRet(const Tensor& t, float x, Tensor* ret) {
  CheckGiven(ret, "AddFloatWithRet", "ret");
  AddScalarInto(t, x, ret);
}
void SubFloatWithRet(const Tensor& t, float x, Tensor* ret) {
  CheckGiven(ret, "SubFloatWithRet", "ret");
  SubScalarInto(t, x, ret);
}
void EltwiseMultFloatWithRet(const Tensor& t, float x, Tensor* ret) {
  CheckGiven(ret, "EltwiseMultFloatWithRet", "ret");
  MulScalarInto(t, x, ret);
}
void DivFloatWithRet(const Tensor& t, float x, Tensor* ret) {
  CheckGiven(ret, "DivFloatWithRet", "ret");
  DivScalarInto(t, x, ret);
}

// SINGA's random fills of a given tensor.
void Bernoulli(float p, Tensor* out) {
  CheckGiven(out, "Bernoulli", "out");
  out->Bernoulli(p);
}
void Gaussian(float mean, float std, Tensor* out) {
  CheckGiven(out, "Gaussian", "out");
  out->Gaussian(mean, std);
}
void Uniform(float low, float high, Tensor* out) {
  CheckGiven(out, "Uniform", "out");
  out->Uniform(low, high);
}

// C = alpha * A @ B + beta * C; A and B 1-D or 2-D, C of the product's shape.
void MultScaled(const char* fn, float alpha, const Tensor& a, const Tensor& b, float beta,
                Tensor* c) {
  CheckGiven(c, fn, "C");
  if (a.nDim() == 2 && b.nDim() == 2 && c->nDim() == 2) {
    singa::Mult(alpha, a, b, beta, c);
    return;
  }
  Tensor r = singa::Mult(a, b);
  SINGA_CHECK(r.shape() == c->shape(), ShapeError, fn, ": the product of shapes ", a.shape(),
              " and ", b.shape(), " has shape ", r.shape(), ", not C's shape ", c->shape());
  if (beta == 0.f) {
    MulScalarInto(r, alpha, c);
  } else {
    MulScalarInto(*c, beta, c);
    singa::Axpy(alpha, r, c);
  }
}
void MultWithRet(const Tensor& a, const Tensor& b, Tensor* c) {
  MultScaled("MultWithRet", 1.f, a, b, 0.f, c);
}
void MultWithScale(float alpha, const Tensor& a, const Tensor& b, float beta, Tensor* c) {
  MultScaled("MultWithScale", alpha, a, b, beta, c);
}

// v as a column (one value per row of M) or a row (one per column), for
// SINGA's AddColumn, SubRow, ... on a matrix M.
Tensor AsColumn(const char* fn, const Tensor& v, const Tensor* m) {
  CheckGiven(m, fn, "M");
  SINGA_CHECK(m->nDim() == 2, ShapeError, fn, ": M must be a matrix, got shape ", m->shape());
  SINGA_CHECK(v.Size() == m->shape(0), ShapeError, fn, ": v of shape ", v.shape(),
              " does not have one value per row of M of shape ", m->shape());
  return v.Reshape({m->shape(0), 1});
}
Tensor AsRow(const char* fn, const Tensor& v, const Tensor* m) {
  CheckGiven(m, fn, "M");
  SINGA_CHECK(m->nDim() == 2, ShapeError, fn, ": M must be a matrix, got shape ", m->shape());
  SINGA_CHECK(v.Size() == m->shape(1), ShapeError, fn, ": v of shape ", v.shape(),
              " does not have one value per column of M of shape ", m->shape());
  return v.Reshape({1, m->shape(1)});
}
// M = alpha * v (broadcast) + beta * M.
void AddScaled(float alpha, float beta, const Tensor& v, Tensor* m) {
  if (beta == 0.f) {
    m->CopyData(MulScalar(v, alpha).Broadcast(m->shape()));
    return;
  }
  if (beta != 1.f) MulScalarInto(*m, beta, m);
  AddInto(*m, alpha == 1.f ? v : MulScalar(v, alpha), m);
}
void AddColumnWithScale(float alpha, float beta, const Tensor& v, Tensor* m) {
  AddScaled(alpha, beta, AsColumn("AddColumnWithScale", v, m), m);
}
void AddRowWithScale(float alpha, float beta, const Tensor& v, Tensor* m) {
  AddScaled(alpha, beta, AsRow("AddRowWithScale", v, m), m);
}
void AddColumn(const Tensor& v, Tensor* m) { AddInto(*m, AsColumn("AddColumn", v, m), m); }
void AddRow(const Tensor& v, Tensor* m) { AddInto(*m, AsRow("AddRow", v, m), m); }
void SubColumn(const Tensor& v, Tensor* m) { SubInto(*m, AsColumn("SubColumn", v, m), m); }
void SubRow(const Tensor& v, Tensor* m) { SubInto(*m, AsRow("SubRow", v, m), m); }
void MultColumn(const Tensor& v, Tensor* m) { MulInto(*m, AsColumn("MultColumn", v, m), m); }
void MultRow(const Tensor& v, Tensor* m) { MulInto(*m, AsRow("MultRow", v, m), m); }
void DivColumn(const Tensor& v, Tensor* m) { DivInto(*m, AsColumn("DivColumn", v, m), m); }
void DivRow(const Tensor& v, Tensor* m) { DivInto(*m, AsRow("DivRow", v, m), m); }

// The targets of a cross-entropy as a (batch, classes) matrix in p's
// dtype: t itself when it has p's size (one-hot or a distribution), else
// t's integer labels, checked to lie in [0, classes), one-hot encoded.
Tensor Targets(const char* fn, const Tensor& p, const Tensor& t) {
  SINGA_CHECK(p.nDim() == 1 || p.nDim() == 2, ShapeError, fn,
              ": p must be a vector or a (batch, classes) matrix, got shape ", p.shape());
  SINGA_CHECK(p.data_type() == kFloat32, DtypeError, fn, ": p must be float32, got ",
              DataTypeName(p.data_type()));
  CheckSameDevice(fn, p, t);
  const size_t batch = p.nDim() == 2 ? p.shape(0) : 1, classes = p.Size() / (batch ? batch : 1);
  const Shape pm = {batch, classes};
  if (t.shape() == p.shape() && t.Size() != batch) return t.AsType(kFloat32).Reshape(pm);
  SINGA_CHECK(t.Size() == batch, ShapeError, fn, ": targets of shape ", t.shape(),
              " are neither one label per row nor of p's shape ", p.shape());
  Tensor labels = t.AsType(kInt).Reshape({batch, 1});
  std::vector<int32_t> host(batch);
  if (batch) labels.CopyDataToHostPtr(host.data(), batch * sizeof(int32_t));
  for (size_t i = 0; i < batch; ++i)
    SINGA_CHECK(host[i] >= 0 && static_cast<size_t>(host[i]) < classes, IndexError, fn,
                ": label ", host[i], " of row ", i, " is out of range for ", classes,
                " classes");
  std::vector<int32_t> range(classes);
  for (size_t j = 0; j < classes; ++j) range[j] = static_cast<int32_t>(j);
  Tensor cls({1, classes}, p.device(), kInt);
  if (classes) cls.CopyDataFromHostPtr(range.data(), classes * sizeof(int32_t));
  return Equal(labels, cls).AsType(kFloat32);
}

// Per-row -sum(t * log(p)), p clamped at FLT_MIN, as SINGA computes it.
Tensor CrossEntropyFwd(const Tensor& p, const Tensor& t) {
  const char* fn = "CrossEntropyFwd";
  Tensor target = Targets(fn, p, t);
  Tensor logp = Log(MaximumScalar(p.Reshape(target.shape()), FLT_MIN));
  return Neg(Sum(Mul(target, logp), {1}, false));
}

// The gradient of the softmax cross-entropy with respect to the logits,
// given the probabilities p: p - t.
Tensor SoftmaxCrossEntropyBwd(const Tensor& p, const Tensor& t) {
  Tensor target = Targets("SoftmaxCrossEntropyBwd", p, t);
  return Sub(p, target.Reshape(p.shape()));
}

// SINGA starts glog here; singa has no logging to set up.
void InitLogging(const char* argv) { (void)argv; }

}  // namespace sw

// Overloads of singa's own names with SINGA's extra forms.
void Mult(const Tensor& a, const Tensor& b, Tensor* c) {
  sw::MultScaled("Mult", 1.f, a, b, 0.f, c);
}
Tensor Sum(const Tensor& t, int axis) { return Sum(t, {axis}, false); }
void SumRows(const Tensor& m, Tensor* v) {
  sw::CheckGiven(v, "SumRows", "v");
  Tensor s = SumRows(m);
  SINGA_CHECK(v->Size() == s.Size(), ShapeError, "SumRows: v of shape ", v->shape(),
              " cannot hold the ", s.Size(), " column sums of shape ", m.shape());
  v->CopyData(s);
}
void SumColumns(const Tensor& m, Tensor* v) {
  sw::CheckGiven(v, "SumColumns", "v");
  Tensor s = SumColumns(m);
  SINGA_CHECK(v->Size() == s.Size(), ShapeError, "SumColumns: v of shape ", v->shape(),
              " cannot hold the ", s.Size(), " row sums of shape ", m.shape());
  v->CopyData(s);
}

}  // namespace singa
%}

// Default arguments without overloads, so that a TypeError raised inside
// reaches Python as it is.
%feature("compactdefaultargs") singa::Tensor::CopyFloatDataFromHostPtr;
%feature("compactdefaultargs") singa::Tensor::CopyIntDataFromHostPtr;
%feature("compactdefaultargs") singa::Tensor::CopyHalfFloatDataFromHostPtr;
%feature("compactdefaultargs") singa::sw::Product;
%feature("compactdefaultargs") singa::sw::CopyDataToFrom;

// ---- Tensor methods under SINGA's names ----
%extend singa::Tensor {
  // SINGA's copy constructor: a second handle on the same storage.
  Tensor(const singa::Tensor& from) { return new singa::Tensor(from); }
  Tensor(const std::vector<size_t>& shape, singa::DataType dtype) {
    return new singa::Tensor(shape, nullptr, dtype);
  }
  bool initialized() const { return !$self->empty(); }
  PyObject* GetFloatValue(int64_t num) const {
    return singa::sw::GetValues(*$self, num, singa::kFloat32, "float32", "GetFloatValue");
  }
  PyObject* GetIntValue(int64_t num) const {
    return singa::sw::GetValues(*$self, num, singa::kInt, "int32", "GetIntValue");
  }
  PyObject* GetHalfFloatValue(int64_t num) const {
    return singa::sw::GetValues(*$self, num, singa::kFloat16, "float16", "GetHalfFloatValue");
  }
  void SetFloatValue(float x) { $self->SetValue(x); }
  PyObject* CopyFloatDataFromHostPtr(PyObject* src, int64_t offset = 0) {
    return singa::sw::CopyFromHost($self, src, offset, singa::kFloat32, "float32",
                                   "CopyFloatDataFromHostPtr");
  }
  PyObject* CopyIntDataFromHostPtr(PyObject* src, int64_t offset = 0) {
    return singa::sw::CopyFromHost($self, src, offset, singa::kInt, "int32",
                                   "CopyIntDataFromHostPtr");
  }
  PyObject* CopyHalfFloatDataFromHostPtr(PyObject* src, int64_t offset = 0) {
    return singa::sw::CopyFromHost($self, src, offset, singa::kFloat16, "float16",
                                   "CopyHalfFloatDataFromHostPtr");
  }
  // New zeroed storage of t's shape, dtype and device.
  void ResetLike(const singa::Tensor& t) {
    singa::Tensor fresh(t.shape(), t.device(), t.data_type());
    fresh.SetValue(0.f);
    *$self = fresh;
  }
  // Fills this tensor with src repeated (axis 9999: src flattened).
  void RepeatData(const std::vector<size_t>& repeats, int axis, int64_t total_repeats,
                  const singa::Tensor& src) {
    singa::sw::CheckTotalRepeats("RepeatData", src, repeats, axis, total_repeats);
    singa::Tensor r = singa::sw::RepeatAlong(src, repeats, axis);
    SINGA_CHECK(r.Size() == $self->Size(), ShapeError, "RepeatData: ", r.Size(),
                " repeated elements do not fit shape ", $self->shape());
    $self->CopyData(r);
  }
  singa::Tensor Repeat(const std::vector<size_t>& repeats, int axis) const {
    return singa::sw::RepeatAlong(*$self, repeats, axis);
  }
  void ToHost() { $self->ToDevice(singa::DefaultDevice()); }
  void iAdd(const singa::Tensor& t) { singa::AddInto(*$self, t, $self); }
  void iSub(const singa::Tensor& t) { singa::SubInto(*$self, t, $self); }
  void iMul(const singa::Tensor& t) { singa::MulInto(*$self, t, $self); }
  void iDiv(const singa::Tensor& t) { singa::DivInto(*$self, t, $self); }
  void iAddFloat(float x) { singa::AddScalarInto(*$self, x, $self); }
  void iSubFloat(float x) { singa::SubScalarInto(*$self, x, $self); }
  void iMulFloat(float x) { singa::MulScalarInto(*$self, x, $self); }
  void iDivFloat(float x) { singa::DivScalarInto(*$self, x, $self); }
}

// ---- free functions ----
%rename(__add__) singa::sw::OpAdd;
%rename(__sub__) singa::sw::OpSub;
%rename(__mul__) singa::sw::OpMul;
%rename(__div__) singa::sw::OpDiv;
%rename(__lt__) singa::sw::OpLt;
%rename(__le__) singa::sw::OpLe;
%rename(__gt__) singa::sw::OpGt;
%rename(__ge__) singa::sw::OpGe;
%rename(__eq__) singa::sw::OpEq;
%rename(Reshape) singa::sw::ShapeReshape;
%rename(Contiguous) singa::sw::ShapeContiguous;
%rename(Transpose) singa::sw::ShapeTranspose;
%rename(DefaultTranspose) singa::sw::ShapeDefaultTranspose;

namespace singa {

void Mult(const Tensor& A, const Tensor& B, Tensor* C);
Tensor Sum(const Tensor& t, int axis);
void SumRows(const Tensor& M, Tensor* v);
void SumColumns(const Tensor& M, Tensor* v);

namespace sw {

size_t Product(const std::vector<size_t>& shape, int64_t start = 0, int64_t len = 0);
int SizeOf(int dtype);
void CopyDataToFrom(Tensor* dst, const Tensor& src, int64_t num, int64_t src_offset = 0,
                    int64_t dst_offset = 0);
void RepeatDataToFrom(bool broadcast_flag, const std::vector<size_t>& repeats, int axis,
                      Tensor* dst, const Tensor& src, int64_t num);
Tensor ShapeReshape(const Tensor& in, const std::vector<size_t>& shape);
Tensor ShapeContiguous(const Tensor& in);
Tensor ShapeTranspose(const Tensor& in, const std::vector<size_t>& axes);
Tensor ShapeTranspose(const Tensor& in);
Tensor ShapeDefaultTranspose(const Tensor& in);
Tensor SliceOn(const Tensor& in, int64_t start, int64_t end, int axis);

Tensor ReLUBackward(const Tensor& in1, const Tensor& in2);
Tensor SoftMaxBackward(const Tensor& in, int axis, const Tensor& fdout);
Tensor Average(const Tensor& t, int axis);
float SumAsFloat(const Tensor& t);

Tensor OpAdd(const Tensor& lhs, const Tensor& rhs);
Tensor OpSub(const Tensor& lhs, const Tensor& rhs);
Tensor OpMul(const Tensor& lhs, const Tensor& rhs);
Tensor OpDiv(const Tensor& lhs, const Tensor& rhs);
Tensor OpLt(const Tensor& lhs, const Tensor& rhs);
Tensor OpLe(const Tensor& lhs, const Tensor& rhs);
Tensor OpGt(const Tensor& lhs, const Tensor& rhs);
Tensor OpGe(const Tensor& lhs, const Tensor& rhs);
Tensor OpEq(const Tensor& lhs, const Tensor& rhs);
Tensor LTFloat(const Tensor& t, float x);
Tensor LEFloat(const Tensor& t, float x);
Tensor GTFloat(const Tensor& t, float x);
Tensor GEFloat(const Tensor& t, float x);
Tensor EQFloat(const Tensor& t, float x);
Tensor AddFloat(const Tensor& t, float x);
Tensor SubFloat(const Tensor& t, float x);
Tensor MultFloat(const Tensor& t, float x);
Tensor DivFloat(const Tensor& t, float x);
Tensor PowFloat(const Tensor& in, float x);
// SINGA's %template names of the same functions.
Tensor oplt(const Tensor& t, float x);
Tensor ople(const Tensor& t, float x);
Tensor opgt(const Tensor& t, float x);
Tensor opge(const Tensor& t, float x);
Tensor opeq(const Tensor& t, float x);
Tensor opadd(const Tensor& t, float x);
Tensor opsub(const Tensor& t, float x);
Tensor opmul(const Tensor& t, float x);
Tensor opdiv(const Tensor& t, float x);

Tensor EltwiseMult(const Tensor& lhs, const Tensor& rhs);
void EltwiseMult(const Tensor& lhs, const Tensor& rhs, Tensor* ret);
void PowWithRet(const Tensor& base, const Tensor& exp, Tensor* out);
void PowFloatWithRet(const Tensor& in, float x, Tensor* out);
void AddFloatWithRet(const Tensor& t, float x, Tensor* ret);
void SubFloatWithRet(const Tensor& t, float x, Tensor* ret);
void EltwiseMultFloatWithRet(const Tensor& t, float x, Tensor* ret);
void DivFloatWithRet(const Tensor& t, float x, Tensor* ret);

void Bernoulli(float p, Tensor* out);
void Gaussian(float mean, float std, Tensor* out);
void Uniform(float low, float high, Tensor* out);

void MultWithRet(const Tensor& A, const Tensor& B, Tensor* C);
void MultWithScale(float alpha, const Tensor& A, const Tensor& B, float beta, Tensor* C);
void AddColumn(const Tensor& v, Tensor* M);
void AddColumnWithScale(float alpha, float beta, const Tensor& v, Tensor* M);
void AddRow(const Tensor& v, Tensor* M);
void AddRowWithScale(float alpha, float beta, const Tensor& v, Tensor* M);
void SubColumn(const Tensor& v, Tensor* M);
void SubRow(const Tensor& v, Tensor* M);
void MultColumn(const Tensor& v, Tensor* M);
void MultRow(const Tensor& v, Tensor* M);
void DivColumn(const Tensor& v, Tensor* M);
void DivRow(const Tensor& v, Tensor* M);

Tensor CrossEntropyFwd(const Tensor& p, const Tensor& t);
Tensor SoftmaxCrossEntropyBwd(const Tensor& p, const Tensor& t);
void InitLogging(const char* argv);

}  // namespace sw
}  // namespace singa

// One function per name for singa's forms and SINGA's extra ones (see the
// %ignore lines in core_tensor.i): header code, after SWIG's type table.
%{
namespace singa {
namespace sw {

// obj as a Tensor, or nullptr when it is not one.
Tensor* TensorArg(PyObject* obj) {
  void* p = nullptr;
  if (!obj || !SWIG_IsOK(SWIG_ConvertPtr(obj, &p, SWIGTYPE_p_singa__Tensor, 0))) return nullptr;
  return static_cast<Tensor*>(p);
}

PyObject* NewTensorObject(Tensor t) {
  return SWIG_InternalNewPointerObj(new Tensor(std::move(t)), SWIGTYPE_p_singa__Tensor,
                                    SWIG_POINTER_OWN);
}

// lhs op rhs as a new tensor, or into ret (SINGA's form) which is returned.
template <typename Op, typename Into>
Tensor BinaryOptRet(Op op, Into into, const Tensor& lhs, const Tensor& rhs, Tensor* ret) {
  if (!ret) return op(lhs, rhs);
  into(lhs, rhs, ret);
  return *ret;
}
Tensor AddOptRet(const Tensor& lhs, const Tensor& rhs, Tensor* ret = nullptr) {
  return BinaryOptRet(static_cast<Tensor (*)(const Tensor&, const Tensor&)>(&singa::Add),
                      &singa::AddInto, lhs, rhs, ret);
}
Tensor SubOptRet(const Tensor& lhs, const Tensor& rhs, Tensor* ret = nullptr) {
  return BinaryOptRet(static_cast<Tensor (*)(const Tensor&, const Tensor&)>(&singa::Sub),
                      &singa::SubInto, lhs, rhs, ret);
}
Tensor DivOptRet(const Tensor& lhs, const Tensor& rhs, Tensor* ret = nullptr) {
  return BinaryOptRet(static_cast<Tensor (*)(const Tensor&, const Tensor&)>(&singa::Div),
                      &singa::DivInto, lhs, rhs, ret);
}

// SoftMax(t), SoftMax(t, axis), SoftMax(t, out), SoftMax(t, out, axis):
// along axis (the last by default); with out, written there and returned.
PyObject* SoftMaxForms(const Tensor& in, PyObject* out_or_axis = nullptr,
                       PyObject* axis_obj = nullptr) {
  Tensor* out = nullptr;
  PyObject* axis_arg = axis_obj;
  if (out_or_axis && PyIndex_Check(out_or_axis)) {
    if (axis_obj) {
      PyErr_SetString(PyExc_TypeError, "SoftMax: an axis as argument 2 takes no argument 3");
      return nullptr;
    }
    axis_arg = out_or_axis;
  } else if (out_or_axis) {
    out = TensorArg(out_or_axis);
    if (!out) {
      PyErr_Format(PyExc_TypeError, "SoftMax: argument 2 must be an int axis or an output "
                   "Tensor, got %s", Py_TYPE(out_or_axis)->tp_name);
      return nullptr;
    }
  }
  int axis = -1;
  if (axis_arg) {
    if (!PyIndex_Check(axis_arg)) {
      PyErr_Format(PyExc_TypeError, "SoftMax: the axis must be an int, got %s",
                   Py_TYPE(axis_arg)->tp_name);
      return nullptr;
    }
    PyObject* i = PyNumber_Index(axis_arg);
    if (!i) return nullptr;
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(i, &overflow);
    if (overflow || v < INT_MIN || v > INT_MAX) {  // as singa.i's int arguments
      PyErr_Format(PyExc_ValueError, "SoftMax: argument %d, %R, is outside the range of int "
                   "(%d to %d)", axis_arg == axis_obj ? 3 : 2, i, INT_MIN, INT_MAX);
      Py_DECREF(i);
      return nullptr;
    }
    Py_DECREF(i);
    axis = static_cast<int>(v);
  }
  if (!out) return NewTensorObject(singa::SoftMax(in, axis));
  CheckSameShape("SoftMax", in, *out);
  out->CopyData(singa::SoftMax(in, axis));
  return NewTensorObject(*out);
}

// y += alpha * x, alpha a number or a one-element float32 tensor.
PyObject* AxpyForms(PyObject* alpha, const Tensor& x, Tensor* y) {
  CheckGiven(y, "Axpy", "y");
  if (Tensor* a = TensorArg(alpha)) {
    AxpyTensor(1.f, *a, x, y);
    Py_RETURN_NONE;
  }
  float f;
  if (!SingaArgFloat(alpha, &f, "Axpy", 1)) return nullptr;
  singa::Axpy(f, x, y);
  Py_RETURN_NONE;
}

}  // namespace sw
}  // namespace singa
%}

// An omitted ret is no error (the Tensor * check in singa.i rejects None).
%typemap(check) singa::Tensor* optional_ret ""
%feature("compactdefaultargs") singa::sw::AddOptRet;
%feature("compactdefaultargs") singa::sw::SubOptRet;
%feature("compactdefaultargs") singa::sw::DivOptRet;
%feature("compactdefaultargs") singa::sw::SoftMaxForms;
%rename(Add) singa::sw::AddOptRet;
%rename(Sub) singa::sw::SubOptRet;
%rename(Div) singa::sw::DivOptRet;
%rename(SoftMax) singa::sw::SoftMaxForms;
%rename(Axpy) singa::sw::AxpyForms;
namespace singa {
namespace sw {
Tensor AddOptRet(const Tensor& lhs, const Tensor& rhs, Tensor* optional_ret = nullptr);
Tensor SubOptRet(const Tensor& lhs, const Tensor& rhs, Tensor* optional_ret = nullptr);
Tensor DivOptRet(const Tensor& lhs, const Tensor& rhs, Tensor* optional_ret = nullptr);
PyObject* SoftMaxForms(const Tensor& in, PyObject* out_or_axis = nullptr,
                       PyObject* axis = nullptr);
PyObject* AxpyForms(PyObject* alpha, const Tensor& x, Tensor* y);
}  // namespace sw
}  // namespace singa
