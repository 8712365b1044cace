// Element-wise ops (expanded from ops.def), reductions and softmax.
#include <algorithm>
#include <cmath>
#include <vector>

#include "dispatch.h"

namespace singa {

namespace {

// float16 tensors are stored, not computed on: ops convert to float32,
// compute, and convert the result back.
bool IsHalf(const Tensor& t) { return t.data_type() == kFloat16; }

// x's strides when it has the output's shape, else its broadcast strides
// (stored in *buf). Element-wise ops run once per call from Python, so the
// common case should not allocate.
const Strides* OperandStrides(const Tensor& x, const Shape& out_shape, const char* name,
                              Strides* buf) {
  if (x.shape() == out_shape) return &x.stride();
  *buf = BroadcastStrides(x, out_shape, name);
  return buf;
}

// x, or a copy of it in *copy when writing out would overwrite x's
// elements before they are read. A reference, so that the closure's capture
// is the only copy of an operand.
const Tensor& Operand(const Tensor& x, const Tensor& out, Tensor* copy) {
  if (SafeToWriteOver(x, out)) return x;
  *copy = Unaliased(x, out);
  return *copy;
}

// Strides of a scalar operand of an ndim-dimensional op (in *buf only for
// more dimensions than views usually have).
const Strides* ScalarStrides(size_t ndim, Strides* buf) {
  static const Strides zeros(64, 0);
  if (ndim <= zeros.size()) return &zeros;
  buf->assign(ndim, 0);
  return buf;
}

template <typename Op>
void UnaryInto(const char* name, const Tensor& x, Tensor* out, Op op = Op()) {
  CheckSameDevice(name, x, *out);
  CheckSameDtype(name, x, *out);
  if (IsHalf(x)) {
    Tensor r(out->shape(), out->device(), kFloat32);
    UnaryInto(name, x.AsType(kFloat32), &r, op);
    out->CopyData(r);
    return;
  }
  if (out->Size() == 0) return;
  Tensor copy;
  const Tensor& src = Operand(x, *out, &copy);
  Strides broadcast;
  const Strides* xs = OperandStrides(src, out->shape(), name, &broadcast);
  CheckComputeType(name, x.data_type());
  ElemSpace sp = MakeElemSpace(out->shape(), {&out->stride(), xs});
  Tensor& o = *out;
  SINGA_LANG_SWITCH(o.device(), Lang, o.device()->Exec(
      [sp, src, o, op](Context* ctx) mutable {
        SINGA_TYPE_SWITCH(o.data_type(), T,
                          Math<Lang>::Unary(sp, src.data<T>(), o.mutable_data<T>(), op, ctx));
      },
      {src.block()}, {o.block()}));
}

template <typename Op>
Tensor UnaryNew(const char* name, const Tensor& x, Op op = Op()) {
  Tensor out(x.shape(), x.device(), x.data_type());
  UnaryInto(name, x, &out, op);
  return out;
}

// The general binary kernel: b_scalar, when given, replaces b.
template <typename Op>
void BinaryInto(const char* name, const Tensor& a, const Tensor* b,
                const float* b_scalar, bool scalar_first, Tensor* out) {
  CheckSameDevice(name, a, *out);
  CheckSameDtype(name, a, *out);
  if (b) {
    CheckSameDevice(name, a, *b);
    CheckSameDtype(name, a, *b);
  }
  if (b && !(a.shape() == out->shape() && b->shape() == out->shape())) {
    Shape s = BroadcastShape(a.shape(), b->shape(), name);
    SINGA_CHECK(BroadcastShape(s, out->shape(), name) == out->shape(),
                ShapeError, name, ": result of shape ", s,
                " does not fit the output of shape ", out->shape());
  }
  if (IsHalf(a)) {
    Tensor r(out->shape(), out->device(), kFloat32);
    Tensor bf = b ? b->AsType(kFloat32) : Tensor();
    BinaryInto<Op>(name, a.AsType(kFloat32), b ? &bf : nullptr, b_scalar,
                   scalar_first, &r);
    out->CopyData(r);
    return;
  }
  if (out->Size() == 0) return;
  Tensor a_copy, b_copy;
  const Tensor& ta = Operand(a, *out, &a_copy);
  const Tensor& tb = b ? Operand(*b, *out, &b_copy) : b_copy;
  Strides a_broadcast, b_broadcast;
  const Strides* sa = OperandStrides(ta, out->shape(), name, &a_broadcast);
  const Strides* sb = b ? OperandStrides(tb, out->shape(), name, &b_broadcast)
                        : ScalarStrides(out->nDim(), &b_broadcast);
  CheckComputeType(name, a.data_type());
  ElemSpace sp = b_scalar && scalar_first
                     ? MakeElemSpace(out->shape(), {&out->stride(), sb, sa})
                     : MakeElemSpace(out->shape(), {&out->stride(), sa, sb});
  Tensor& o = *out;
  const bool has_scalar = b_scalar != nullptr;
  const float scalar = has_scalar ? *b_scalar : 0.f;
  SINGA_LANG_SWITCH(o.device(), Lang, o.device()->Exec(
      [sp, ta, tb, o, has_scalar, scalar, scalar_first](Context* ctx) mutable {
        SINGA_TYPE_SWITCH(o.data_type(), T, {
          T* y = o.mutable_data<T>();
          if (has_scalar)
            Math<Lang>::BinaryScalar(sp, ta.data<T>(), op::ToElem<T>(scalar), scalar_first,
                                     y, Op(), ctx);
          else
            Math<Lang>::Binary(sp, ta.data<T>(), tb.data<T>(), y, Op(), ctx);
        });
      },
      {ta.block(), b ? tb.block() : nullptr}, {o.block()}));
}

}  // namespace

#define SINGA_UNARY_OP(Name, expr)                                   \
  Tensor Name(const Tensor& x) { return UnaryNew<op::Name>(#Name, x); } \
  void Name##Into(const Tensor& x, Tensor* out) {                    \
    UnaryInto<op::Name>(#Name, x, out);                              \
  }
#define SINGA_BINARY_OP(Name, expr)                                       \
  Tensor Name(const Tensor& a, const Tensor& b) {                         \
    CheckSameDevice(#Name, a, b);                                         \
    CheckSameDtype(#Name, a, b);                                          \
    Tensor out = a.shape() == b.shape()                                   \
                     ? Tensor(a.shape(), a.device(), a.data_type())       \
                     : Tensor(BroadcastShape(a.shape(), b.shape(), #Name), \
                              a.device(), a.data_type());                 \
    BinaryInto<op::Name>(#Name, a, &b, nullptr, false, &out);             \
    return out;                                                           \
  }                                                                       \
  Tensor Name##Scalar(const Tensor& a, float s) {                         \
    Tensor out(a.shape(), a.device(), a.data_type());                     \
    BinaryInto<op::Name>(#Name, a, nullptr, &s, false, &out);             \
    return out;                                                           \
  }                                                                       \
  Tensor Scalar##Name(float s, const Tensor& a) {                         \
    Tensor out(a.shape(), a.device(), a.data_type());                     \
    BinaryInto<op::Name>(#Name, a, nullptr, &s, true, &out);              \
    return out;                                                           \
  }                                                                       \
  void Name##Into(const Tensor& a, const Tensor& b, Tensor* out) {        \
    BinaryInto<op::Name>(#Name, a, &b, nullptr, false, out);              \
  }                                                                       \
  void Name##ScalarInto(const Tensor& a, float s, Tensor* out) {          \
    BinaryInto<op::Name>(#Name, a, nullptr, &s, false, out);              \
  }
#include "singa/core/ops.def"

const char* UnaryOpNames() {
  return ""
#define SINGA_UNARY_OP(Name, expr) " " #Name
#include "singa/core/ops.def"
      ;
}

const char* BinaryOpNames() {
  return ""
#define SINGA_BINARY_OP(Name, expr) " " #Name
#include "singa/core/ops.def"
      ;
}

Tensor Clip(const Tensor& x, float low, float high) {
  SINGA_CHECK(!(low > high), ValueError, "Clip: min ", low,
              " is greater than max ", high);
  return UnaryNew("Clip", x, op::ClipOp{low, high});
}

Tensor LeakyReLU(const Tensor& x, float alpha) {
  return UnaryNew("LeakyReLU", x, op::LeakyReLUOp{alpha});
}

Tensor Where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  const char* name = "Where";
  CheckSameDevice(name, cond, a);
  CheckSameDevice(name, a, b);
  CheckSameDtype(name, a, b);
  if (IsHalf(a))
    return Where(cond, a.AsType(kFloat32), b.AsType(kFloat32)).AsType(kFloat16);
  if (cond.data_type() != a.data_type()) {
    // Casting cond itself would truncate (0.5 to 0): test it against zero
    // in its own dtype, then swap the branches to select on "cond == 0".
    CheckSameDevice(name, cond, b);
    return Where(Not(cond).AsType(a.data_type()), b, a);
  }
  const Tensor& c = cond;
  Shape s = BroadcastShape(BroadcastShape(c.shape(), a.shape(), name),
                           b.shape(), name);
  Tensor out(s, a.device(), a.data_type());
  if (out.Size() == 0) return out;
  Strides sc = BroadcastStrides(c, s, name), sa = BroadcastStrides(a, s, name),
          sb = BroadcastStrides(b, s, name);
  CheckComputeType(name, a.data_type());
  ElemSpace sp = MakeElemSpace(s, {&out.stride(), &sc, &sa, &sb});
  SINGA_LANG_SWITCH(out.device(), Lang, out.device()->Exec(
      [sp, c, a, b, out](Context* ctx) mutable {
        SINGA_TYPE_SWITCH(out.data_type(), T,
                          Math<Lang>::Where(sp, c.data<T>(), a.data<T>(),
                                            b.data<T>(), out.mutable_data<T>(), ctx));
      },
      {c.block(), a.block(), b.block()}, {out.block()}));
  return out;
}

// ---- reductions ----

namespace {

std::vector<bool> ReducedAxes(const Tensor& x, const std::vector<int>& axes,
                              const char* name) {
  std::vector<bool> red(x.nDim(), axes.empty());
  std::vector<size_t> norm;
  // Every axis is range-checked before repeats are looked for, as NumPy does.
  for (int a : axes) norm.push_back(NormAxis(a, x.nDim(), name));
  for (size_t ax : norm) {
    SINGA_CHECK(!red[ax], ValueError, name, ": axis ", ax, " is repeated in ", axes);
    red[ax] = true;
  }
  return red;
}

Tensor ReduceImpl(ReduceKind kind, const char* name, const Tensor& x,
                  const std::vector<int>& axes, bool keepdims) {
  if (IsHalf(x))
    return ReduceImpl(kind, name, x.AsType(kFloat32), axes, keepdims)
        .AsType(kFloat16);
  std::vector<bool> red = ReducedAxes(x, axes, name);
  CheckComputeType(name, x.data_type());
  Shape kept = x.shape(), dropped;
  for (size_t i = 0; i < x.nDim(); ++i) {
    if (red[i]) {
      SINGA_CHECK(kind == ReduceKind::kSum || x.shape()[i] > 0, ValueError,
                  name, ": cannot reduce axis ", i, " of size 0 in shape ",
                  x.shape());
      kept[i] = 1;
    } else {
      dropped.push_back(x.shape()[i]);
    }
  }
  Tensor cur = x.Contiguous();
  Shape shape = x.shape();
  // Reduce each run of adjacent reduced axes as (outer, n, inner), last run
  // first, so every step reads a contiguous tensor.
  for (size_t end = shape.size(); end-- > 0;) {
    if (!red[end]) continue;
    size_t begin = end;
    while (begin > 0 && red[begin - 1]) --begin;
    int64_t outer = 1, n = 1, inner = 1;
    for (size_t i = 0; i < begin; ++i) outer *= shape[i];
    for (size_t i = begin; i <= end; ++i) n *= shape[i];
    for (size_t i = end + 1; i < shape.size(); ++i) inner *= shape[i];
    for (size_t i = begin; i <= end; ++i) shape[i] = 1;
    Tensor next(shape, cur.device(), cur.data_type());
    SINGA_LANG_SWITCH(cur.device(), Lang, cur.device()->Exec(
        [kind, outer, n, inner, cur, next](Context* ctx) mutable {
          SINGA_TYPE_SWITCH(cur.data_type(), T,
                            Math<Lang>::Reduce(kind, outer, n, inner, cur.data<T>(),
                                               next.mutable_data<T>(), ctx));
        },
        {cur.block()}, {next.block()}));
    cur = next;
    if (begin == 0) break;
    end = begin;
  }
  return cur.Reshape(keepdims ? kept : dropped);
}

}  // namespace

Tensor Sum(const Tensor& x, const std::vector<int>& axes, bool keepdims) {
  return ReduceImpl(ReduceKind::kSum, "Sum", x, axes, keepdims);
}

Tensor Mean(const Tensor& x, const std::vector<int>& axes, bool keepdims) {
  SINGA_CHECK(x.data_type() != kInt, DtypeError,
              "Mean: needs a float32 tensor, got int32");
  Tensor s = Sum(x, axes, keepdims);
  const size_t count = s.Size() ? x.Size() / s.Size() : 0;
  return MulScalar(s, count ? 1.0f / static_cast<float>(count) : NAN);
}

Tensor Max(const Tensor& x, const std::vector<int>& axes, bool keepdims) {
  return ReduceImpl(ReduceKind::kMax, "Max", x, axes, keepdims);
}

Tensor Min(const Tensor& x, const std::vector<int>& axes, bool keepdims) {
  return ReduceImpl(ReduceKind::kMin, "Min", x, axes, keepdims);
}

float SumAll(const Tensor& x) {
  x.device()->CheckHostRead("SumAll");
  Tensor s = Sum(x.data_type() == kFloat32 ? x : x.AsType(kFloat32), {}, false);
  float v = 0;
  s.CopyDataToHostPtr(&v, sizeof(float));
  return v;
}

namespace {
Tensor ArgReduce(bool is_max, const char* name, const Tensor& x, int axis,
                 bool keepdims) {
  if (IsHalf(x)) return ArgReduce(is_max, name, x.AsType(kFloat32), axis, keepdims);
  size_t ax = NormAxis(axis, x.nDim(), name);
  SINGA_CHECK(x.shape()[ax] > 0, ValueError, name, ": axis ", axis,
              " of shape ", x.shape(), " is empty");
  Tensor c = x.Contiguous();
  int64_t outer = 1, inner = 1, n = x.shape()[ax];
  for (size_t i = 0; i < ax; ++i) outer *= x.shape()[i];
  for (size_t i = ax + 1; i < x.nDim(); ++i) inner *= x.shape()[i];
  Shape shape = x.shape();
  if (keepdims)
    shape[ax] = 1;
  else
    shape.erase(shape.begin() + ax);
  CheckComputeType(name, x.data_type());
  Tensor out(shape, x.device(), kInt);
  if (out.Size() == 0) return out;
  SINGA_LANG_SWITCH(c.device(), Lang, c.device()->Exec(
      [is_max, outer, n, inner, c, out](Context* ctx) mutable {
        SINGA_TYPE_SWITCH(c.data_type(), T,
                          Math<Lang>::ArgReduce(is_max, outer, n, inner, c.data<T>(),
                                                out.mutable_data<int32_t>(), ctx));
      },
      {c.block()}, {out.block()}));
  return out;
}
}  // namespace

Tensor Argmax(const Tensor& x, int axis, bool keepdims) {
  return ArgReduce(true, "Argmax", x, axis, keepdims);
}

Tensor Argmin(const Tensor& x, int axis, bool keepdims) {
  return ArgReduce(false, "Argmin", x, axis, keepdims);
}

Tensor SumRows(const Tensor& m) {
  SINGA_CHECK(m.nDim() == 2, ShapeError, "SumRows: needs a matrix, got shape ",
              m.shape());
  return Sum(m, {0}, false);
}

Tensor SumColumns(const Tensor& m) {
  SINGA_CHECK(m.nDim() == 2, ShapeError,
              "SumColumns: needs a matrix, got shape ", m.shape());
  return Sum(m, {1}, false);
}

namespace {
Tensor SoftmaxImpl(bool log, const Tensor& x, int axis) {
  const char* name = log ? "LogSoftMax" : "SoftMax";
  if (IsHalf(x)) return SoftmaxImpl(log, x.AsType(kFloat32), axis).AsType(kFloat16);
  size_t ax = NormAxis(axis, std::max<size_t>(x.nDim(), 1), name);
  CheckFloat32(name, x.data_type());
  Tensor c = x.Contiguous();
  Tensor out(x.shape(), x.device(), x.data_type());
  if (out.Size() == 0) return out;
  int64_t outer = 1, inner = 1, n = x.nDim() ? x.shape()[ax] : 1;
  for (size_t i = 0; i < ax; ++i) outer *= x.shape()[i];
  for (size_t i = ax + 1; i < x.nDim(); ++i) inner *= x.shape()[i];
  SINGA_LANG_SWITCH(c.device(), Lang, c.device()->Exec(
      [log, outer, n, inner, c, out](Context* ctx) mutable {
        Math<Lang>::Softmax(log, outer, n, inner, c.data<float>(), out.mutable_data<float>(),
                            ctx);
      },
      {c.block()}, {out.block()}));
  return out;
}
}  // namespace

Tensor SoftMax(const Tensor& x, int axis) { return SoftmaxImpl(false, x, axis); }
Tensor LogSoftMax(const Tensor& x, int axis) { return SoftmaxImpl(true, x, axis); }

namespace {
// Checks shared by the fused softmax cross-entropy and its gradient: (N, C)
// float32 scores on a host device and N class labels (int32 or float32).
void CheckScoresAndLabels(const char* name, const Tensor& x, const Tensor& labels) {
  CheckSameDevice(name, x, labels);
  SINGA_CHECK(x.device()->is_host(), DeviceError, name, ": runs on host devices only, got ",
              x.device()->name());
  CheckFloat32(name, x.data_type());
  SINGA_CHECK(labels.data_type() == kFloat32 || labels.data_type() == kInt, DtypeError, name,
              ": labels must be int32 or float32, got ", DataTypeName(labels.data_type()));
  SINGA_CHECK(x.nDim() == 2, ShapeError, name, ": needs (batch, classes) scores, got shape ",
              x.shape());
  SINGA_CHECK(labels.Size() == x.shape()[0] && labels.nDim() >= 1 && labels.nDim() <= 2 &&
                  labels.shape()[0] == x.shape()[0],
              ShapeError, name, ": labels of shape ", labels.shape(),
              " do not match scores of shape ", x.shape(), " (one label a row)");
}

// Label i of lc as a float.
double LabelValue(const Tensor& lc, int64_t i) {
  return lc.data_type() == kInt ? double(lc.data<int32_t>()[i]) : double(lc.data<float>()[i]);
}

// Label i as a class index, or -1 when it is not a whole number in [0, c)
// (such a row matches no class, as a one-hot comparison would find).
int64_t LabelAt(const Tensor& lc, int64_t i, int64_t c) {
  const double v = LabelValue(lc, i);
  if (!(v >= 0 && v < double(c)) || v != std::floor(v)) return -1;
  return int64_t(v);
}
}  // namespace

std::vector<Tensor> SoftmaxCrossEntropyLabels(const Tensor& x, const Tensor& labels) {
  const char* name = "SoftmaxCrossEntropyLabels";
  CheckScoresAndLabels(name, x, labels);
  const int64_t n = int64_t(x.shape()[0]), c = int64_t(x.shape()[1]);
  Tensor xc = x.Contiguous(), lc = labels.Contiguous();
  // Labels are read here when they can be (not while a graph records, when
  // later steps' labels are unknown): an out-of-range one is an error.
  if (!x.device()->graph_enabled())
    for (int64_t i = 0; i < n; ++i) {
      const double v = LabelValue(lc, i);
      SINGA_CHECK(!(v < 0 || v >= double(c)), IndexError, name, ": label ", v, " at row ", i,
                  " is out of range for scores of shape ", x.shape(), " (", c, " classes)");
    }
  Tensor loss({1}, x.device(), kFloat32), prob(x.shape(), x.device(), kFloat32);
  x.device()->Exec(
      [xc, lc, loss, prob, n, c](Context*) mutable {
        const float* xs = xc.data<float>();
        float* ps = prob.mutable_data<float>();
        double total = 0;
        for (int64_t i = 0; i < n; ++i) {
          const float* xi = xs + i * c;
          float* pi = ps + i * c;
          const int64_t y = LabelAt(lc, i, c);
          if (y < 0) {
            // A row without a class (a fraction, or out of range in a
            // recorded graph) adds nothing, as a zero one-hot row would.
            std::fill(pi, pi + c, 0.f);
            continue;
          }
          float mx = xi[0];
          for (int64_t j = 1; j < c; ++j) mx = std::max(mx, xi[j]);
          float sum = 0.f;
          for (int64_t j = 0; j < c; ++j) sum += (pi[j] = std::exp(xi[j] - mx));
          const float inv = 1.f / sum;
          for (int64_t j = 0; j < c; ++j) pi[j] *= inv;
          total += double(mx) + std::log(double(sum)) - double(xi[y]);
        }
        loss.mutable_data<float>()[0] = n ? float(total / double(n)) : 0.f;
      },
      {xc.block(), lc.block()}, {loss.block(), prob.block()});
  return {loss, prob};
}

Tensor SoftmaxCrossEntropyLabelsGrad(const Tensor& prob, const Tensor& labels,
                                     const Tensor& dy) {
  const char* name = "SoftmaxCrossEntropyLabelsGrad";
  CheckScoresAndLabels(name, prob, labels);
  CheckSameDevice(name, prob, dy);
  CheckFloat32(name, dy.data_type());
  SINGA_CHECK(dy.Size() == 1, ShapeError, name, ": dy must have one element, got shape ",
              dy.shape());
  const int64_t n = int64_t(prob.shape()[0]), c = int64_t(prob.shape()[1]);
  Tensor pc = prob.Contiguous(), lc = labels.Contiguous(), dc = dy;
  Tensor dx(prob.shape(), prob.device(), kFloat32);
  prob.device()->Exec(
      [pc, lc, dc, dx, n, c](Context*) mutable {
        const float scale = n ? dc.data<float>()[0] / float(n) : 0.f;
        const float* ps = pc.data<float>();
        float* gs = dx.mutable_data<float>();
        for (int64_t i = 0; i < n * c; ++i) gs[i] = ps[i] * scale;
        for (int64_t i = 0; i < n; ++i) {
          const int64_t y = LabelAt(lc, i, c);
          if (y >= 0) gs[i * c + y] -= scale;
        }
      },
      {pc.block(), lc.block(), dc.block()}, {dx.block()});
  return dx;
}

}  // namespace singa
