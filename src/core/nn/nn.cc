// Checks and tensor plumbing around the CPU kernels of nn_kernels.h.
#include "singa/core/nn.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <initializer_list>
#include <stdexcept>

#include "singa/core/nn_kernels.h"
#ifdef USE_CUDA
#include "nn_cuda.h"
#endif

namespace singa {

namespace {

int ToInt(size_t v, const char* op, const Shape& shape) {
  SINGA_CHECK(v <= static_cast<size_t>(INT_MAX), ShapeError, op, ": shape ",
              shape, " is too large for the CPU kernels");
  return static_cast<int>(v);
}

void CheckFloat(const char* op, const Tensor& t, const char* what) {
  SINGA_CHECK(t.data_type() == kFloat32, DtypeError, op, ": ", what,
              " must be float32, got ", DataTypeName(t.data_type()));
}

// float16 operands are computed in float32 (converted in, results converted
// back): true when any operand is float16, after checking that all are.
bool AllHalf(const char* op, std::initializer_list<const Tensor*> ts) {
  bool any = false, all = true;
  for (const Tensor* t : ts) {
    if (t->empty()) continue;
    const bool h = t->data_type() == kFloat16;
    any = any || h;
    all = all && h;
  }
  SINGA_CHECK(!any || all, DtypeError, op,
              ": operands mix float16 with other dtypes (cast them to one dtype)");
  return any;
}
Tensor ToF32(const Tensor& t) { return t.empty() ? t : t.AsType(kFloat32); }
Tensor ToF16(const Tensor& t) { return t.AsType(kFloat16); }
std::vector<Tensor> ToF16(std::vector<Tensor> ts) {
  for (Tensor& t : ts)
    if (t.data_type() == kFloat32) t = t.AsType(kFloat16);
  return ts;
}

std::vector<int> Pair(const std::vector<int>& v, const char* op, const char* what) {
  SINGA_CHECK(v.size() == 2, ValueError, op, ": ", what,
              " needs 2 values (h, w), got ", v.size());
  return v;
}

std::vector<int> Pads(const std::vector<int>& v, const char* op) {
  SINGA_CHECK(v.size() == 4, ValueError, op,
              ": pads need 4 values (top, left, bottom, right), got ", v.size());
  for (int p : v) SINGA_CHECK(p >= 0, ValueError, op, ": pads ", v, " are negative");
  return v;
}

// Queues fn(ctx) on the device of the first output. Every argument was
// checked before (the kernels' own checks cannot fire), and fn captures by
// value, as doc/design.md's Exec contract asks.
template <typename Fn>
void RunKernel(const std::vector<Block*>& reads, const std::vector<Tensor>& outs, Fn fn) {
  std::vector<Block*> writes;
  for (const Tensor& t : outs) writes.push_back(t.block());
  outs[0].device()->Exec([fn = std::move(fn)](Context* ctx) mutable { fn(ctx); }, reads,
                         writes);
}

// Calls cpu::Fn(args...) for a tensor on a host device and, in a CUDA
// build, gpu::Fn(args..., ctx) for one on a GPU.
#ifdef USE_CUDA
#define SINGA_NN_KERNEL(on_host, Fn, ctx, ...) \
  ((on_host) ? cpu::Fn(__VA_ARGS__) : gpu::Fn(__VA_ARGS__, ctx))
#else
#define SINGA_NN_KERNEL(on_host, Fn, ctx, ...) ((void)(on_host), cpu::Fn(__VA_ARGS__))
#endif

void CheckEps(const char* op, float eps) {
  SINGA_CHECK(eps >= 0.f && std::isfinite(eps), ValueError, op,
              ": eps must be finite and non-negative, got ", eps);
}

// Fills the fields that convolution and pooling parameters share.
template <typename P>
void FillWindow(const char* op, const Shape& xs, const std::vector<int>& stride,
                const std::vector<int>& pads, const std::vector<int>& dilation, P* p) {
  SINGA_CHECK(xs.size() == 4, ShapeError, op, ": input must be 4-D NCHW, got shape ", xs);
  auto s = Pair(stride, op, "stride");
  auto d = Pair(dilation, op, "dilation");
  auto pd = Pads(pads, op);
  p->n = ToInt(xs[0], op, xs);
  p->c = ToInt(xs[1], op, xs);
  p->h = ToInt(xs[2], op, xs);
  p->w = ToInt(xs[3], op, xs);
  p->sh = s[0];
  p->sw = s[1];
  p->pad_t = pd[0];
  p->pad_l = pd[1];
  p->pad_b = pd[2];
  p->pad_r = pd[3];
  p->dh = d[0];
  p->dw = d[1];
}

template <typename P>
void Validate(const char* op, const P& p) {
  try {
    p.Validate();
  } catch (const std::invalid_argument& e) {
    SINGA_THROW(ShapeError, op, ": ", e.what());
  }
}

cpu::ConvParams MakeConv(const char* op, const Shape& xs, const Shape& ws,
                         const std::vector<int>& stride, const std::vector<int>& pads,
                         const std::vector<int>& dilation, int groups) {
  cpu::ConvParams cp;
  FillWindow(op, xs, stride, pads, dilation, &cp);
  SINGA_CHECK(ws.size() == 4, ShapeError, op,
              ": weight must be 4-D (O, I/groups, kH, kW), got shape ", ws);
  SINGA_CHECK(groups >= 1, ValueError, op, ": groups must be positive, got ", groups);
  SINGA_CHECK(ws[1] * static_cast<size_t>(groups) == xs[1], ShapeError, op, ": input shape ",
              xs, " has ", xs[1], " channels but weight shape ", ws, " with groups=", groups,
              " expects ", ws[1] * groups);
  cp.oc = ToInt(ws[0], op, ws);
  cp.kh = ToInt(ws[2], op, ws);
  cp.kw = ToInt(ws[3], op, ws);
  cp.groups = groups;
  Validate(op, cp);
  return cp;
}

cpu::PoolParams MakePool(const char* op, const Shape& xs, const std::vector<int>& kernel,
                         const std::vector<int>& stride, const std::vector<int>& pads,
                         const std::vector<int>& dilation, bool ceil_mode,
                         bool count_include_pad) {
  cpu::PoolParams pp;
  FillWindow(op, xs, stride, pads, dilation, &pp);
  auto k = Pair(kernel, op, "kernel");
  pp.kh = k[0];
  pp.kw = k[1];
  pp.ceil_mode = ceil_mode;
  pp.count_include_pad = count_include_pad;
  Validate(op, pp);
  return pp;
}

}  // namespace

Tensor Conv2dForward(const Tensor& x, const Tensor& w, const Tensor& b,
                     const std::vector<int>& stride, const std::vector<int>& pads,
                     const std::vector<int>& dilation, int groups) {
  const char* op = "Conv2d";
  if (AllHalf(op, {&x, &w, &b}))
    return ToF16(Conv2dForward(ToF32(x), ToF32(w), ToF32(b), stride, pads, dilation, groups));
  CheckFloat(op, x, "input");
  CheckFloat(op, w, "weight");
  CheckSameDevice(op, x, w);
  cpu::ConvParams p = MakeConv(op, x.shape(), w.shape(), stride, pads, dilation, groups);
  Tensor bc;
  if (!b.empty()) {
    CheckFloat(op, b, "bias");
    CheckSameDevice(op, x, b);
    SINGA_CHECK(b.Size() == static_cast<size_t>(p.oc), ShapeError, op, ": bias of shape ",
                b.shape(), " does not match ", p.oc, " output channels");
    bc = b.Contiguous();
  }
  Tensor xc = x.Contiguous(), wc = w.Contiguous();
  Tensor y({x.shape()[0], w.shape()[0], size_t(p.oh()), size_t(p.ow())}, x.device());
  const bool host = y.device()->is_host();
  RunKernel({xc.block(), wc.block(), bc.block()}, {y}, [=](Context* ctx) mutable {
    // Read when the kernel runs: a write queued before it has taken its
    // new stamp by then.
    p.w_stamp = wc.block()->stamp();
    SINGA_NN_KERNEL(host, Conv2dForward, ctx, xc.data<float>(), wc.data<float>(),
                    bc.empty() ? nullptr : bc.data<float>(), y.mutable_data<float>(), p);
  });
  return y;
}

Tensor Conv2dBackwardData(const Tensor& dy, const Tensor& w, const Shape& x_shape,
                          const std::vector<int>& stride, const std::vector<int>& pads,
                          const std::vector<int>& dilation, int groups) {
  const char* op = "Conv2dBackwardData";
  if (AllHalf(op, {&dy, &w}))
    return ToF16(Conv2dBackwardData(ToF32(dy), ToF32(w), x_shape, stride, pads, dilation, groups));
  CheckFloat(op, dy, "gradient");
  CheckFloat(op, w, "weight");
  CheckSameDevice(op, dy, w);
  cpu::ConvParams p = MakeConv(op, x_shape, w.shape(), stride, pads, dilation, groups);
  Shape ys = {x_shape[0], w.shape()[0], size_t(p.oh()), size_t(p.ow())};
  SINGA_CHECK(dy.shape() == ys, ShapeError, op, ": gradient of shape ", dy.shape(),
              " should be ", ys);
  Tensor dyc = dy.Contiguous(), wc = w.Contiguous();
  Tensor dx(x_shape, dy.device());
  const bool host = dx.device()->is_host();
  RunKernel({dyc.block(), wc.block()}, {dx}, [=](Context* ctx) mutable {
    p.w_stamp = wc.block()->stamp();
    SINGA_NN_KERNEL(host, Conv2dBackwardData, ctx, dyc.data<float>(), wc.data<float>(),
                    dx.mutable_data<float>(), p);
  });
  return dx;
}

Tensor Conv2dBackwardWeight(const Tensor& x, const Tensor& dy, const Shape& w_shape,
                            const std::vector<int>& stride, const std::vector<int>& pads,
                            const std::vector<int>& dilation, int groups) {
  const char* op = "Conv2dBackwardWeight";
  if (AllHalf(op, {&x, &dy}))
    return ToF16(
        Conv2dBackwardWeight(ToF32(x), ToF32(dy), w_shape, stride, pads, dilation, groups));
  CheckFloat(op, x, "input");
  CheckFloat(op, dy, "gradient");
  CheckSameDevice(op, x, dy);
  cpu::ConvParams p = MakeConv(op, x.shape(), w_shape, stride, pads, dilation, groups);
  Shape ys = {x.shape()[0], w_shape[0], size_t(p.oh()), size_t(p.ow())};
  SINGA_CHECK(dy.shape() == ys, ShapeError, op, ": gradient of shape ", dy.shape(),
              " should be ", ys);
  Tensor xc = x.Contiguous(), dyc = dy.Contiguous();
  Tensor dw(w_shape, x.device());
  const bool host = dw.device()->is_host();
  RunKernel({xc.block(), dyc.block()}, {dw}, [=](Context* ctx) mutable {
    SINGA_NN_KERNEL(host, Conv2dBackwardWeight, ctx, xc.data<float>(), dyc.data<float>(),
                    dw.mutable_data<float>(), p);
  });
  return dw;
}

std::vector<Tensor> MaxPool2dForward(const Tensor& x, const std::vector<int>& kernel,
                                     const std::vector<int>& stride,
                                     const std::vector<int>& pads,
                                     const std::vector<int>& dilation, bool ceil_mode) {
  const char* op = "MaxPool2d";
  if (AllHalf(op, {&x}))
    return ToF16(MaxPool2dForward(ToF32(x), kernel, stride, pads, dilation, ceil_mode));
  CheckFloat(op, x, "input");
  cpu::PoolParams p = MakePool(op, x.shape(), kernel, stride, pads, dilation, ceil_mode, false);
  Shape ys = {x.shape()[0], x.shape()[1], size_t(p.oh()), size_t(p.ow())};
  Tensor xc = x.Contiguous();
  Tensor y(ys, x.device()), argmax(ys, x.device(), kInt);
  const bool host = y.device()->is_host();
  RunKernel({xc.block()}, {y, argmax}, [=](Context* ctx) mutable {
    SINGA_NN_KERNEL(host, MaxPool2dForward, ctx, xc.data<float>(), y.mutable_data<float>(),
                    argmax.mutable_data<int32_t>(), p);
  });
  return {y, argmax};
}

Tensor MaxPool2dBackward(const Tensor& dy, const Tensor& argmax, const Shape& x_shape,
                         const std::vector<int>& kernel, const std::vector<int>& stride,
                         const std::vector<int>& pads, const std::vector<int>& dilation,
                         bool ceil_mode) {
  const char* op = "MaxPool2dBackward";
  if (AllHalf(op, {&dy}))
    return ToF16(MaxPool2dBackward(ToF32(dy), argmax, x_shape, kernel, stride, pads, dilation,
                                   ceil_mode));
  CheckFloat(op, dy, "gradient");
  SINGA_CHECK(argmax.data_type() == kInt, DtypeError, op, ": argmax must be int32, got ",
              DataTypeName(argmax.data_type()));
  CheckSameDevice(op, dy, argmax);
  cpu::PoolParams p = MakePool(op, x_shape, kernel, stride, pads, dilation, ceil_mode, false);
  Shape ys = {x_shape[0], x_shape[1], size_t(p.oh()), size_t(p.ow())};
  SINGA_CHECK(dy.shape() == ys && argmax.shape() == ys, ShapeError, op, ": gradient ",
              dy.shape(), " and argmax ", argmax.shape(), " should both be ", ys);
  Tensor dyc = dy.Contiguous(), ac = argmax.Contiguous();
  Tensor dx(x_shape, dy.device());
  const bool host = dx.device()->is_host();
  // The kernel scatters into dx at these positions and skips any outside
  // the H*W plane (negative marks a window with no input). Run eagerly on
  // the host, it counts those at or past the plane's end, which are the
  // caller's error, reported below; the 2x2 loops find them while checking
  // each argmax against its window, so the usual case costs no extra pass.
  // While a graph is recorded the values do not exist yet, and on a GPU
  // reading them would cost a copy and a sync per call: there they are
  // only skipped.
  const bool check = host && !dx.device()->graph_enabled();
  size_t past = 0;
  size_t* report = check ? &past : nullptr;  // Exec runs the kernel now
  RunKernel({dyc.block(), ac.block()}, {dx}, [=]([[maybe_unused]] Context* ctx) mutable {
#ifdef USE_CUDA
    if (!host) return gpu::MaxPool2dBackward(dyc.data<float>(), ac.data<int32_t>(),
                                             dx.mutable_data<float>(), p, ctx);
#endif
    const size_t n = cpu::MaxPool2dBackward(dyc.data<float>(), ac.data<int32_t>(),
                                            dx.mutable_data<float>(), p);
    if (report) *report = n;
  });
  if (past) {
    const int32_t* am = ac.data<int32_t>();
    const int64_t plane = int64_t(p.h) * p.w;
    for (size_t i = 0; i < ac.Size(); ++i)
      SINGA_CHECK(am[i] < plane, IndexError, op, ": argmax ", am[i], " at flat position ", i,
                  " is outside an input plane of ", p.h, "x", p.w, " elements");
  }
  return dx;
}

Tensor AvgPool2dForward(const Tensor& x, const std::vector<int>& kernel,
                        const std::vector<int>& stride, const std::vector<int>& pads,
                        bool ceil_mode, bool count_include_pad) {
  const char* op = "AvgPool2d";
  if (AllHalf(op, {&x}))
    return ToF16(AvgPool2dForward(ToF32(x), kernel, stride, pads, ceil_mode, count_include_pad));
  CheckFloat(op, x, "input");
  cpu::PoolParams p = MakePool(op, x.shape(), kernel, stride, pads, {1, 1}, ceil_mode,
                               count_include_pad);
  Tensor xc = x.Contiguous();
  Tensor y({x.shape()[0], x.shape()[1], size_t(p.oh()), size_t(p.ow())}, x.device());
  const bool host = y.device()->is_host();
  RunKernel({xc.block()}, {y}, [=](Context* ctx) mutable {
    SINGA_NN_KERNEL(host, AvgPool2dForward, ctx, xc.data<float>(), y.mutable_data<float>(), p);
  });
  return y;
}

Tensor AvgPool2dBackward(const Tensor& dy, const Shape& x_shape,
                         const std::vector<int>& kernel, const std::vector<int>& stride,
                         const std::vector<int>& pads, bool ceil_mode,
                         bool count_include_pad) {
  const char* op = "AvgPool2dBackward";
  if (AllHalf(op, {&dy}))
    return ToF16(AvgPool2dBackward(ToF32(dy), x_shape, kernel, stride, pads, ceil_mode,
                                   count_include_pad));
  CheckFloat(op, dy, "gradient");
  cpu::PoolParams p = MakePool(op, x_shape, kernel, stride, pads, {1, 1}, ceil_mode,
                               count_include_pad);
  Shape ys = {x_shape[0], x_shape[1], size_t(p.oh()), size_t(p.ow())};
  SINGA_CHECK(dy.shape() == ys, ShapeError, op, ": gradient of shape ", dy.shape(),
              " should be ", ys);
  Tensor dyc = dy.Contiguous();
  Tensor dx(x_shape, dy.device());
  const bool host = dx.device()->is_host();
  RunKernel({dyc.block()}, {dx}, [=](Context* ctx) mutable {
    SINGA_NN_KERNEL(host, AvgPool2dBackward, ctx, dyc.data<float>(), dx.mutable_data<float>(),
                    p);
  });
  return dx;
}

namespace {
// (n, c, hw) of a batch-norm input with channels on axis 1.
void BnDims(const char* op, const Tensor& x, const Tensor& scale, int* n, int* c, int* hw) {
  CheckFloat(op, x, "input");
  CheckFloat(op, scale, "scale");
  CheckSameDevice(op, x, scale);
  SINGA_CHECK(x.nDim() >= 2, ShapeError, op, ": input must be at least 2-D (N, C, ...), got ",
              x.shape());
  *n = ToInt(x.shape()[0], op, x.shape());
  *c = ToInt(x.shape()[1], op, x.shape());
  *hw = ToInt(x.Size() / std::max<size_t>(1, x.shape()[0] * x.shape()[1]), op, x.shape());
  SINGA_CHECK(scale.Size() == x.shape()[1], ShapeError, op, ": scale of shape ", scale.shape(),
              " does not match ", x.shape()[1], " channels of input ", x.shape());
}

void CheckChannelVec(const char* op, const Tensor& x, const Tensor& v, int c,
                     const char* what) {
  CheckFloat(op, v, what);
  CheckSameDevice(op, x, v);
  SINGA_CHECK(v.Size() == static_cast<size_t>(c), ShapeError, op, ": ", what, " of shape ",
              v.shape(), " does not match ", c, " channels");
}
}  // namespace

std::vector<Tensor> BatchNormForwardTraining(const Tensor& x, const Tensor& scale,
                                             const Tensor& bias, float eps) {
  const char* op = "BatchNorm";
  if (AllHalf(op, {&x, &scale, &bias}))
    return ToF16(BatchNormForwardTraining(ToF32(x), ToF32(scale), ToF32(bias), eps));
  int n, c, hw;
  BnDims(op, x, scale, &n, &c, &hw);
  CheckChannelVec(op, x, bias, c, "bias");
  CheckEps(op, eps);
  SINGA_CHECK(n * static_cast<size_t>(hw) > 0, ShapeError, op,
              ": training needs at least one value per channel, got input ", x.shape());
  Tensor xc = x.Contiguous(), sc = scale.Contiguous(), bc = bias.Contiguous();
  Tensor y(x.shape(), x.device()), mean({size_t(c)}, x.device()), var({size_t(c)}, x.device());
  const bool host = y.device()->is_host();
  RunKernel({xc.block(), sc.block(), bc.block()}, {y, mean, var}, [=](Context* ctx) mutable {
    SINGA_NN_KERNEL(host, BatchNormForwardTraining, ctx, xc.data<float>(), sc.data<float>(),
                    bc.data<float>(), y.mutable_data<float>(), mean.mutable_data<float>(),
                    var.mutable_data<float>(), n, c, hw, eps);
  });
  return {y, mean, var};
}

Tensor BatchNormForwardInference(const Tensor& x, const Tensor& scale, const Tensor& bias,
                                 const Tensor& running_mean, const Tensor& running_var,
                                 float eps) {
  const char* op = "BatchNorm";
  if (AllHalf(op, {&x, &scale, &bias, &running_mean, &running_var}))
    return ToF16(BatchNormForwardInference(ToF32(x), ToF32(scale), ToF32(bias),
                                           ToF32(running_mean), ToF32(running_var), eps));
  int n, c, hw;
  BnDims(op, x, scale, &n, &c, &hw);
  CheckChannelVec(op, x, bias, c, "bias");
  CheckChannelVec(op, x, running_mean, c, "running mean");
  CheckChannelVec(op, x, running_var, c, "running var");
  CheckEps(op, eps);
  if (x.Size() == 0) return Tensor(x.shape(), x.device());
  Tensor xc = x.Contiguous(), sc = scale.Contiguous(), bc = bias.Contiguous(),
         mc = running_mean.Contiguous(), vc = running_var.Contiguous();
  Tensor y(x.shape(), x.device());
  const bool host = y.device()->is_host();
  RunKernel({xc.block(), sc.block(), bc.block(), mc.block(), vc.block()}, {y},
            [=](Context* ctx) mutable {
    SINGA_NN_KERNEL(host, BatchNormForwardInference, ctx, xc.data<float>(), sc.data<float>(),
                    bc.data<float>(), mc.data<float>(), vc.data<float>(),
                    y.mutable_data<float>(), n, c, hw, eps);
  });
  return y;
}

std::vector<Tensor> BatchNormBackward(const Tensor& x, const Tensor& dy, const Tensor& scale,
                                      const Tensor& mean, const Tensor& var, float eps) {
  const char* op = "BatchNormBackward";
  if (AllHalf(op, {&x, &dy, &scale, &mean, &var}))
    return ToF16(
        BatchNormBackward(ToF32(x), ToF32(dy), ToF32(scale), ToF32(mean), ToF32(var), eps));
  int n, c, hw;
  BnDims(op, x, scale, &n, &c, &hw);
  CheckFloat(op, dy, "gradient");
  CheckSameDevice(op, x, dy);
  SINGA_CHECK(dy.shape() == x.shape(), ShapeError, op, ": gradient of shape ", dy.shape(),
              " does not match input ", x.shape());
  CheckChannelVec(op, x, mean, c, "mean");
  CheckChannelVec(op, x, var, c, "var");
  CheckEps(op, eps);
  if (x.Size() == 0) {
    Tensor ds({size_t(c)}, x.device()), db({size_t(c)}, x.device());
    ds.SetValue(0.f);
    db.SetValue(0.f);
    return {Tensor(x.shape(), x.device()), ds, db};
  }
  Tensor xc = x.Contiguous(), dyc = dy.Contiguous(), sc = scale.Contiguous(),
         mc = mean.Contiguous(), vc = var.Contiguous();
  Tensor dx(x.shape(), x.device()), ds({size_t(c)}, x.device()), db({size_t(c)}, x.device());
  const bool host = dx.device()->is_host();
  RunKernel({xc.block(), dyc.block(), sc.block(), mc.block(), vc.block()}, {dx, ds, db},
            [=](Context* ctx) mutable {
    SINGA_NN_KERNEL(host, BatchNormBackward, ctx, xc.data<float>(), dyc.data<float>(),
                    sc.data<float>(), mc.data<float>(), vc.data<float>(), dx.mutable_data<float>(),
                    ds.mutable_data<float>(), db.mutable_data<float>(), n, c, hw, eps);
  });
  return {dx, ds, db};
}

}  // namespace singa
