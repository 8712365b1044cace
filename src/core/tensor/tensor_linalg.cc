// GEMM, batched matmul, axpy, and the copying ops concat, repeat and tile.
#include <algorithm>
#include <cstring>
#include <vector>

#include "dispatch.h"

namespace singa {

namespace {

// How BLAS can read a 2-D strided view without a copy: row-major with a
// leading dimension, or transposed. False when neither fits.
struct GemmView {
  bool trans = false;
  int64_t ld = 1;
};

bool AsGemmView(int64_t rows, int64_t cols, int64_t s0, int64_t s1,
                GemmView* v) {
  if (rows <= 1) s0 = std::max<int64_t>(cols, 1);
  if (cols <= 1) s1 = 1;
  if (s1 == 1 && s0 >= std::max<int64_t>(cols, 1)) {
    *v = {false, s0};
    return true;
  }
  if (cols > 1 && rows <= 1) return false;
  if (s0 == 1 && s1 >= std::max<int64_t>(rows, 1)) {
    *v = {true, s1};
    return true;
  }
  return false;
}

// Returns x or a contiguous copy, and how BLAS should read its last two axes.
Tensor GemmOperand(const Tensor& x, GemmView* v) {
  const size_t nd = x.nDim();
  int64_t r = x.shape()[nd - 2], c = x.shape()[nd - 1];
  if (AsGemmView(r, c, x.stride()[nd - 2], x.stride()[nd - 1], v)) return x;
  Tensor y = x.Contiguous();
  *v = {false, std::max<int64_t>(c, 1)};
  return y;
}

void CheckMatmulOperands(const char* name, const Tensor& a, const Tensor& b) {
  CheckSameDevice(name, a, b);
  CheckSameDtype(name, a, b);
}

// Inside an Exec closure: runs the statement with T bound to the GEMM
// element type (float16 is computed with float32 accumulation).
#define SINGA_GEMM_TYPE_SWITCH(dtype, T, ...) \
  do {                                        \
    if ((dtype) == kFloat16) {                \
      using T = Half;                         \
      __VA_ARGS__;                            \
    } else {                                  \
      SINGA_TYPE_SWITCH(dtype, T, __VA_ARGS__); \
    }                                         \
  } while (0)

}  // namespace

void Mult(float alpha, const Tensor& a, const Tensor& b, float beta, Tensor* c) {
  const char* name = "Mult";
  CheckMatmulOperands(name, a, b);
  CheckSameDevice(name, a, *c);
  CheckSameDtype(name, a, *c);
  SINGA_CHECK(a.nDim() == 2 && b.nDim() == 2 && c->nDim() == 2, ShapeError,
              name, ": needs matrices, got shapes ", a.shape(), ", ",
              b.shape(), " and ", c->shape());
  const int64_t m = a.shape()[0], k = a.shape()[1], n = b.shape()[1];
  SINGA_CHECK(b.shape()[0] == static_cast<size_t>(k), ShapeError, name,
              ": shapes ", a.shape(), " and ", b.shape(),
              " cannot be multiplied (", k, " != ", b.shape()[0], ")");
  SINGA_CHECK(c->shape() == Shape({size_t(m), size_t(n)}), ShapeError, name,
              ": output of shape ", c->shape(), " should be ",
              Shape({size_t(m), size_t(n)}));
  if (m == 0 || n == 0) return;
  GemmView va, vb, vc;
  Tensor ta = GemmOperand(a, &va), tb = GemmOperand(b, &vb);
  if (c->stride()[1] != 1 && n > 1) {
    Tensor tmp = c->Clone();
    Mult(alpha, a, b, beta, &tmp);
    c->CopyData(tmp);
    return;
  }
  AsGemmView(m, n, c->stride()[0], 1, &vc);
  if (k == 0) {
    if (beta == 0.f)
      c->SetValue(0.f);
    else
      MulScalarInto(*c, beta, c);
    return;
  }
  Tensor tc = *c;
  SINGA_LANG_SWITCH(tc.device(), Lang, tc.device()->Exec(
      [=](Context* ctx) mutable {
        SINGA_GEMM_TYPE_SWITCH(tc.data_type(), T,
                               Math<Lang>::Gemm(va.trans, vb.trans, m, n, k, alpha,
                                                ta.data<T>(), va.ld, tb.data<T>(),
                                                vb.ld, beta, tc.mutable_data<T>(),
                                                vc.ld, ctx));
      },
      // c is read only when beta is not 0 (a fresh output is write-only).
      {ta.block(), tb.block(), beta != 0.f ? tc.block() : nullptr}, {tc.block()}));
}

Tensor Mult(const Tensor& a, const Tensor& b) {
  const char* name = "Mult";
  CheckMatmulOperands(name, a, b);
  SINGA_CHECK(a.nDim() >= 1 && a.nDim() <= 2 && b.nDim() >= 1 && b.nDim() <= 2,
              ShapeError, name, ": needs 1-D or 2-D operands, got shapes ",
              a.shape(), " and ", b.shape(), " (use matmul for batches)");
  Tensor a2 = a.nDim() == 1 ? a.Reshape({1, a.shape()[0]}) : a;
  Tensor b2 = b.nDim() == 1 ? b.Reshape({b.shape()[0], 1}) : b;
  SINGA_CHECK(a2.shape()[1] == b2.shape()[0], ShapeError, name, ": shapes ",
              a.shape(), " and ", b.shape(), " cannot be multiplied (",
              a2.shape()[1], " != ", b2.shape()[0], ")");
  Tensor c({a2.shape()[0], b2.shape()[1]}, a.device(), a.data_type());
  Mult(1.f, a2, b2, 0.f, &c);
  Shape out;
  if (a.nDim() == 2) out.push_back(a.shape()[0]);
  if (b.nDim() == 2) out.push_back(b.shape()[1]);
  return c.Reshape(out);
}

Tensor LinearForward(const Tensor& x, const Tensor& w, const Tensor& b) {
  const char* name = "LinearForward";
  CheckMatmulOperands(name, x, w);
  CheckSameDevice(name, x, b);
  CheckSameDtype(name, x, b);
  SINGA_CHECK(x.nDim() == 2 && w.nDim() == 2 && b.nDim() == 1 && b.shape()[0] == w.shape()[1],
              ShapeError, name, ": needs x (batch, in), W (in, out) and b (out,), got shapes ",
              x.shape(), ", ", w.shape(), " and ", b.shape());
  if (!x.device()->is_host()) return Add(Mult(x, w), b);
  const size_t m = x.shape()[0], n = w.shape()[1];
  Tensor y({m, n}, x.device(), x.data_type());
  if (y.Size() == 0) return y;
  // Every row of y starts as b, and the GEMM adds x W to it (beta = 1):
  // no separate pass that reads y back to add the bias.
  Tensor bc = b.Contiguous();
  const size_t row = n * SizeOf(y.data_type());
  x.device()->Exec(
      [bc, y, m, row](Context*) mutable {
        const char* src = static_cast<const char*>(bc.raw_data());
        char* dst = static_cast<char*>(y.mutable_raw_data());
        for (size_t i = 0; i < m; ++i) std::memcpy(dst + i * row, src, row);
      },
      {bc.block()}, {y.block()});
  Mult(1.f, x, w, 1.f, &y);
  return y;
}

Tensor Matmul(const Tensor& a, const Tensor& b) {
  const char* name = "Matmul";
  CheckMatmulOperands(name, a, b);
  SINGA_CHECK(a.nDim() >= 1 && b.nDim() >= 1, ShapeError, name,
              ": operands need at least one dimension, got shapes ", a.shape(),
              " and ", b.shape());
  if (a.nDim() <= 2 && b.nDim() <= 2) return Mult(a, b);
  Tensor a2 = a.nDim() == 1 ? a.Reshape({1, a.shape()[0]}) : a;
  Tensor b2 = b.nDim() == 1 ? b.Reshape({b.shape()[0], 1}) : b;
  const size_t na = a2.nDim(), nb = b2.nDim();
  const int64_t m = a2.shape()[na - 2], k = a2.shape()[na - 1],
                n = b2.shape()[nb - 1];
  SINGA_CHECK(b2.shape()[nb - 2] == static_cast<size_t>(k), ShapeError, name,
              ": shapes ", a.shape(), " and ", b.shape(),
              " cannot be multiplied (", k, " != ", b2.shape()[nb - 2], ")");
  Shape batch_a(a2.shape().begin(), a2.shape().end() - 2);
  Shape batch_b(b2.shape().begin(), b2.shape().end() - 2);
  Shape batch = BroadcastShape(batch_a, batch_b, name);
  Shape out_shape = batch;
  out_shape.push_back(m);
  out_shape.push_back(n);
  Tensor out(out_shape, a.device(), a.data_type());
  // 1-D operands lose their promoted axis in the result, as in NumPy.
  Shape final_shape = batch;
  if (a.nDim() != 1) final_shape.push_back(m);
  if (b.nDim() != 1) final_shape.push_back(n);
  // Empty results and empty sums (k == 0, all zeros) need no operand views,
  // which an operand with no elements could not give.
  if (out.Size() == 0) return out.Reshape(final_shape);
  if (k == 0) {
    out.SetValue(0.f);
    return out.Reshape(final_shape);
  }
  GemmView va, vb;
  Tensor ta = GemmOperand(a2, &va), tb = GemmOperand(b2, &vb);
  // Batch strides of each operand over the broadcast batch shape.
  Shape sha(ta.shape().begin(), ta.shape().end() - 2);
  Shape shb(tb.shape().begin(), tb.shape().end() - 2);
  Tensor va_view = ta.View(sha, Strides(ta.stride().begin(), ta.stride().end() - 2), ta.offset());
  Tensor vb_view = tb.View(shb, Strides(tb.stride().begin(), tb.stride().end() - 2), tb.offset());
  Strides bsa = BroadcastStrides(va_view, batch, name);
  Strides bsb = BroadcastStrides(vb_view, batch, name);
  const int64_t nbatch = static_cast<int64_t>(Product(batch));
  // Element offsets of each product's operands. When they step evenly (a
  // contiguous or broadcast batch, the usual case) one batched call does all.
  std::vector<int64_t> off_a(nbatch), off_b(nbatch);
  for (int64_t i = 0; i < nbatch; ++i) {
    int64_t oa = 0, ob = 0, r = i;
    for (size_t d = batch.size(); d-- > 0;) {
      int64_t idx = r % static_cast<int64_t>(batch[d]);
      r /= static_cast<int64_t>(batch[d]);
      oa += idx * bsa[d];
      ob += idx * bsb[d];
    }
    off_a[i] = oa;
    off_b[i] = ob;
  }
  const int64_t step_a = nbatch > 1 ? off_a[1] - off_a[0] : 0;
  const int64_t step_b = nbatch > 1 ? off_b[1] - off_b[0] : 0;
  bool even = true;
  for (int64_t i = 0; even && i < nbatch; ++i)
    even = off_a[i] == off_a[0] + i * step_a && off_b[i] == off_b[0] + i * step_b;
  SINGA_LANG_SWITCH(out.device(), Lang, out.device()->Exec(
      [=](Context* ctx) mutable {
        SINGA_GEMM_TYPE_SWITCH(out.data_type(), T, {
          const T* pa = ta.data<T>();
          const T* pb = tb.data<T>();
          T* pc = out.mutable_data<T>();
          if (even) {
            Math<Lang>::GemmBatched(va.trans, vb.trans, m, n, k, 1.f, pa + off_a[0], va.ld,
                                    step_a, pb + off_b[0], vb.ld, step_b, 0.f, pc, n, m * n,
                                    nbatch, ctx);
          } else {
            for (int64_t i = 0; i < nbatch; ++i)
              Math<Lang>::Gemm(va.trans, vb.trans, m, n, k, 1.f, pa + off_a[i], va.ld,
                               pb + off_b[i], vb.ld, 0.f, pc + i * m * n, n, ctx);
          }
        });
      },
      {ta.block(), tb.block()}, {out.block()}));
  return out.Reshape(final_shape);
}

namespace {
// y = alpha * x + beta * y, with alpha times alpha_src[0] when alpha_src is
// given: a one-element float32 tensor read when the work runs, so recorded
// work picks up its current value. One pass over y.
void AxpbyImpl(const char* name, float alpha, const Tensor* alpha_src, const Tensor& x,
               float beta, Tensor* y) {
  CheckSameDevice(name, x, *y);
  CheckSameDtype(name, x, *y);
  SINGA_CHECK(x.Size() == y->Size(), ShapeError, name, ": shapes ", x.shape(), " and ",
              y->shape(), " differ in size");
  if (alpha_src) {
    CheckSameDevice(name, *alpha_src, *y);
    SINGA_CHECK(alpha_src->Size() == 1, ShapeError, name,
                ": alpha must have one element, got shape ", alpha_src->shape());
    SINGA_CHECK(alpha_src->data_type() == kFloat32, DtypeError, name,
                ": alpha must be float32, got ", DataTypeName(alpha_src->data_type()));
  }
  if (y->Size() == 0) return;
  Tensor xs = x.shape() == y->shape() ? x : x.Reshape(y->shape());
  if (y->data_type() != kFloat32 || !y->device()->is_host()) {
    // float16 and int32 go through the element-wise ops, as do devices
    // whose kernels cannot read alpha on the host.
    Tensor scaled;
    if (alpha_src) {
      Tensor k = MulScalar(alpha_src->Reshape({}), alpha);
      scaled = Mul(xs, k.data_type() == xs.data_type() ? k : k.AsType(xs.data_type()));
    } else {
      scaled = MulScalar(xs, alpha);
    }
    if (beta != 1.f) MulScalarInto(*y, beta, y);
    AddInto(*y, scaled, y);
    return;
  }
  Tensor xa = Unaliased(xs, *y);
  ElemSpace sp = MakeElemSpace(y->shape(), {&y->stride(), &xa.stride(), &y->stride()});
  Tensor o = *y;
  Tensor a = alpha_src ? *alpha_src : Tensor();
  const bool has_src = alpha_src != nullptr;
  o.device()->Exec(
      [sp, xa, o, a, has_src, alpha, beta](Context* ctx) mutable {
        const float k = has_src ? alpha * a.data<float>()[0] : alpha;
        Math<lang::Cpp>::Binary(sp, xa.data<float>(), o.data<float>(),
                                o.mutable_data<float>(), op::AxpbyOp{k, beta}, ctx);
      },
      {xa.block(), o.block(), has_src ? a.block() : nullptr}, {o.block()});
}
}  // namespace

void Axpy(float alpha, const Tensor& x, Tensor* y) {
  AxpbyImpl("Axpy", alpha, nullptr, x, 1.f, y);
}

void Axpby(float alpha, const Tensor& x, float beta, Tensor* y) {
  AxpbyImpl("Axpby", alpha, nullptr, x, beta, y);
}

void AxpyTensor(float scale, const Tensor& alpha, const Tensor& x, Tensor* y) {
  AxpbyImpl("AxpyTensor", scale, &alpha, x, 1.f, y);
}

Tensor ConcatOn(const std::vector<Tensor>& xs, int axis) {
  const char* name = "Concat";
  SINGA_CHECK(!xs.empty(), ValueError, name, ": needs at least one tensor");
  const Tensor& first = xs[0];
  SINGA_CHECK(first.nDim() > 0, ShapeError, name,
              ": cannot concatenate 0-d tensors");
  size_t ax = NormAxis(axis, first.nDim(), name);
  Shape shape = first.shape();
  shape[ax] = 0;
  for (const Tensor& x : xs) {
    CheckSameDevice(name, first, x);
    CheckSameDtype(name, first, x);
    bool ok = x.nDim() == first.nDim();
    for (size_t i = 0; ok && i < x.nDim(); ++i)
      ok = i == ax || x.shape()[i] == first.shape()[i];
    SINGA_CHECK(ok, ShapeError, name, ": shapes ", first.shape(), " and ",
                x.shape(), " differ outside axis ", axis);
    shape[ax] += x.shape()[ax];
  }
  Tensor out(shape, first.device(), first.data_type());
  size_t pos = 0;
  for (const Tensor& x : xs) {
    const size_t len = x.shape()[ax];
    if (len) {
      Tensor dst = out.Slice(ax, pos, pos + len);
      dst.CopyData(x);
    }
    pos += len;
  }
  return out;
}

Tensor Repeat(const Tensor& x, const std::vector<size_t>& repeats, int axis) {
  const char* name = "Repeat";
  size_t ax = NormAxis(axis, x.nDim(), name);
  const size_t len = x.shape()[ax];
  SINGA_CHECK(repeats.size() == 1 || repeats.size() == len, ValueError, name,
              ": ", repeats.size(), " repeat counts for axis ", axis,
              " of length ", len);
  if (repeats.size() == 1) {
    // View x as (..., len, 1, ...) broadcast to (..., len, r, ...).
    Shape s = x.shape();
    Strides st = x.stride();
    s.insert(s.begin() + ax + 1, repeats[0]);
    st.insert(st.begin() + ax + 1, 0);
    Shape out = x.shape();
    out[ax] *= repeats[0];
    return x.View(s, st, x.offset()).Contiguous().Reshape(out);
  }
  Shape shape = x.shape();
  shape[ax] = 0;
  for (size_t r : repeats) shape[ax] += r;
  Tensor out(shape, x.device(), x.data_type());
  size_t pos = 0;
  for (size_t i = 0; i < len; ++i) {
    if (repeats[i] == 0) continue;
    Tensor src = x.Slice(ax, i, i + 1);
    Shape bs = src.shape();
    bs[ax] = repeats[i];
    Tensor dst = out.Slice(ax, pos, pos + repeats[i]);
    dst.CopyData(src.Broadcast(bs));
    pos += repeats[i];
  }
  return out;
}

Tensor Tile(const Tensor& x, const std::vector<size_t>& reps) {
  const size_t nd = std::max(x.nDim(), reps.size());
  Shape xs(nd - x.nDim(), 1), r(nd - reps.size(), 1);
  xs.insert(xs.end(), x.shape().begin(), x.shape().end());
  r.insert(r.end(), reps.begin(), reps.end());
  Tensor xv = x.Reshape(xs);
  // View as (r0, d0, r1, d1, ...) with zero strides on the repeat axes.
  Shape vs, out;
  Strides st;
  for (size_t i = 0; i < nd; ++i) {
    vs.push_back(r[i]);
    st.push_back(0);
    vs.push_back(xs[i]);
    st.push_back(xv.stride()[i]);
    out.push_back(r[i] * xs[i]);
  }
  Product(out);
  return xv.View(vs, st, xv.offset()).Contiguous().Reshape(out);
}

namespace {
// idx (int32, contiguous, on x's device) after checking that every position
// is in [-n, n). The positions are read on the host: on a GPU that copy
// waits for the work queued before it.
Tensor CheckedIndices(const char* op, const Tensor& idx, size_t n, const Shape& shape,
                      size_t axis) {
  SINGA_CHECK(idx.data_type() == kInt, DtypeError, op, ": indices must be int32, got ",
              DataTypeName(idx.data_type()));
  idx.device()->CheckHostRead(op);
  Tensor ic = idx.Contiguous();
  std::vector<int32_t> host(ic.Size());
  const int32_t* p = ic.data<int32_t>();
  if (!ic.device()->is_host()) {
    ic.CopyDataToHostPtr(host.data(), host.size() * sizeof(int32_t));
    p = host.data();
  }
  const int64_t len = static_cast<int64_t>(n);
  for (size_t i = 0; i < host.size(); ++i)
    SINGA_CHECK(p[i] >= -len && p[i] < len, IndexError, op, ": index ", p[i],
                " is out of range for axis ", axis, " of shape ", shape);
  return ic;
}

// (outer, n, inner) of shape around axis.
void Around(const Shape& shape, size_t axis, int64_t* outer, int64_t* inner) {
  *outer = 1;
  *inner = 1;
  for (size_t i = 0; i < axis; ++i) *outer *= shape[i];
  for (size_t i = axis + 1; i < shape.size(); ++i) *inner *= shape[i];
}
}  // namespace

Tensor IndexSelect(const Tensor& x, const Tensor& idx, int axis) {
  const char* op = "IndexSelect";
  CheckSameDevice(op, x, idx);
  const size_t ax = NormAxis(axis, x.nDim(), op);
  Tensor ic = CheckedIndices(op, idx, x.shape()[ax], x.shape(), ax);
  Shape shape(x.shape().begin(), x.shape().begin() + ax);
  shape.insert(shape.end(), idx.shape().begin(), idx.shape().end());
  shape.insert(shape.end(), x.shape().begin() + ax + 1, x.shape().end());
  Tensor out(shape, x.device(), x.data_type());
  if (out.Size() == 0) return out;
  Tensor xc = x.Contiguous();
  int64_t outer, inner;
  Around(x.shape(), ax, &outer, &inner);
  const int64_t n = x.shape()[ax], m = static_cast<int64_t>(ic.Size());
  // Rows are copied as they are: only the element size matters.
  const bool half = SizeOf(x.data_type()) == 2;
  SINGA_LANG_SWITCH(out.device(), Lang, out.device()->Exec(
      [=](Context* ctx) mutable {
        if (half)
          Math<Lang>::IndexSelect(outer, n, inner, xc.data<uint16_t>(), ic.data<int32_t>(), m,
                                  out.mutable_data<uint16_t>(), ctx);
        else
          Math<Lang>::IndexSelect(outer, n, inner, xc.data<uint32_t>(), ic.data<int32_t>(), m,
                                  out.mutable_data<uint32_t>(), ctx);
      },
      {xc.block(), ic.block()}, {out.block()}));
  return out;
}

void IndexAdd(Tensor* dst, const Tensor& idx, const Tensor& src, int axis) {
  const char* op = "IndexAdd";
  CheckSameDevice(op, *dst, src);
  CheckSameDevice(op, *dst, idx);
  CheckSameDtype(op, *dst, src);
  const size_t ax = NormAxis(axis, dst->nDim(), op);
  Tensor ic = CheckedIndices(op, idx, dst->shape()[ax], dst->shape(), ax);
  Shape want = dst->shape();
  want[ax] = ic.Size();
  SINGA_CHECK(src.Size() == Product(want), ShapeError, op, ": source of shape ", src.shape(),
              " does not fit ", want, " (", ic.Size(), " positions along axis ", ax,
              " of ", dst->shape(), ")");
  if (src.Size() == 0) return;
  CheckComputeType(op, dst->data_type());
  if (!dst->IsContiguous()) {
    Tensor tmp = dst->Clone();
    IndexAdd(&tmp, idx, src, axis);
    dst->CopyData(tmp);
    return;
  }
  Tensor sc = src.Contiguous();
  int64_t outer, inner;
  Around(dst->shape(), ax, &outer, &inner);
  const int64_t n = dst->shape()[ax], m = static_cast<int64_t>(ic.Size());
  Tensor d = *dst;
  SINGA_LANG_SWITCH(d.device(), Lang, d.device()->Exec(
      [=](Context* ctx) mutable {
        SINGA_TYPE_SWITCH(d.data_type(), T,
                          Math<Lang>::IndexAdd(outer, n, inner, sc.data<T>(),
                                               ic.data<int32_t>(), m, d.mutable_data<T>(), ctx));
      },
      {sc.block(), ic.block(), d.block()}, {d.block()}));
}

}  // namespace singa
