// Optimizer steps as one pass over host float32 tensors: SGD with momentum,
// Adam, RMSProp and AdaGrad (their element loops are in optim_step_isa.cc).
// Other dtypes and devices, views and aliased buffers take the separate
// element-wise passes these replace; the fused loops round every step as
// those passes do.
#include <algorithm>
#include <cstdint>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#else
inline int omp_get_max_threads() { return 1; }
inline int omp_get_num_threads() { return 1; }
inline int omp_get_thread_num() { return 0; }
#endif

#include "dispatch.h"
#include "optim_step.h"

namespace singa {

namespace {

// Floats of the parameter a thread claims (ClaimLines) ahead of its update,
// 16 KiB: the claimed lines are still in L1 when the update rewrites them.
constexpr int64_t kClaimChunk = 4096;
// Parameters up to this many floats (4 MiB) are claimed when several
// threads update them; larger ones are mostly in memory, not in the other
// core's cache, and the extra pass cost more than it saved (ResNet-18's
// 512 x 256 x 3 x 3 and 512 x 512 x 3 x 3 weights: 1.2-1.6x the time).
constexpr int64_t kClaimMax = int64_t(1) << 20;
// Updates from this many floats run on all threads.
constexpr int64_t kParallelUpdate = int64_t(1) << 15;

// Rewrites one byte of every cache line of x[lo, hi) with its own value, so
// the calling core owns the lines before a loop stores to them. On two
// threads the parameter was last read by both cores (the layer's forward
// and backward products split it between them), and the update's stores
// to lines the other core holds stalled it: on the AVX2 EPYC host, whose
// two vCPUs sit on different dies at times, the 800 x 500 update of
// LeNet's first dense layer took 1.6-1.9 ms instead of 0.2-0.3 ms. A pass
// of single stores gets the lines in parallel; the update then took
// 0.4-0.6 ms there (doc/performance.md). Each thread claims only the bytes
// of the range it writes, so no value changes under another thread.
inline void ClaimLines(float* x, int64_t lo, int64_t hi) {
  volatile char* c = reinterpret_cast<volatile char*>(x + lo);
  const int64_t bytes = (hi - lo) * int64_t(sizeof(float));
  for (int64_t i = 0; i < bytes; i += 64) c[i] = c[i];
}

// Runs span(lo, hi) over [0, n), one contiguous share per thread when n is
// large, each share claimed chunk by chunk in param (see ClaimLines) when
// several threads share a parameter of at most kClaimMax floats. Shares are
// whole 16-float chunks, so each is aligned like the whole.
template <class Span>
void ParallelUpdate(int64_t n, float* param, const Span& span) {
  const int nth = n >= kParallelUpdate ? omp_get_max_threads() : 1;
#pragma omp parallel num_threads(nth) if (nth > 1)
  {
    const int nt = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t per = ((n + nt - 1) / nt + 15) / 16 * 16;
    const int64_t lo = std::min<int64_t>(n, per * t), hi = std::min<int64_t>(n, lo + per);
    if (nt > 1 && n <= kClaimMax) {
      for (int64_t i = lo; i < hi; i += kClaimChunk) {
        const int64_t e = std::min(hi, i + kClaimChunk);
        ClaimLines(param, i, e);
        span(i, e);
      }
    } else {
      span(lo, hi);
    }
  }
}

// Whether a fused step may run: host float32, every operand contiguous,
// the state buffers and the parameter in different Blocks, and grad either
// elsewhere or exactly one of them.
bool FusedStepFits(const Tensor& grad, const std::vector<const Tensor*>& state,
                   const Tensor& param) {
  if (param.data_type() != kFloat32 || !param.device()->is_host() || !param.IsContiguous() ||
      !grad.IsContiguous() || !SafeToWriteOver(grad, param))
    return false;
  for (size_t i = 0; i < state.size(); ++i) {
    const Tensor& s = *state[i];
    if (!s.IsContiguous() || !SafeToWriteOver(grad, s) || s.block() == param.block())
      return false;
    for (size_t j = 0; j < i; ++j)
      if (s.block() == state[j]->block()) return false;
  }
  return true;
}

// A one-element float32 tensor on param's device, read when the work runs.
void CheckScalarTensor(const char* op, const char* what, const Tensor& t, const Tensor& param) {
  CheckSameDevice(op, t, param);
  SINGA_CHECK(t.Size() == 1, ShapeError, op, ": ", what, " must have one element, got shape ",
              t.shape());
  SINGA_CHECK(t.data_type() == kFloat32, DtypeError, op, ": ", what, " must be float32, got ",
              DataTypeName(t.data_type()));
}

// grad and every state buffer on param's device, of its dtype and size.
void CheckStateTensors(const char* op, const Tensor& grad,
                       const std::vector<const Tensor*>& state, const Tensor& param) {
  CheckSameDevice(op, grad, param);
  CheckSameDtype(op, grad, param);
  SINGA_CHECK(grad.Size() == param.Size(), ShapeError, op, ": grad ", grad.shape(),
              " and parameter ", param.shape(), " differ in size");
  for (const Tensor* s : state) {
    CheckSameDevice(op, *s, param);
    CheckSameDtype(op, *s, param);
    SINGA_CHECK(s->Size() == param.Size(), ShapeError, op, ": state buffer ", s->shape(),
                " and parameter ", param.shape(), " differ in size");
  }
}

// For the separate passes: grad shaped like param, plus weight_decay *
// param in a new tensor when the decay is not zero (grad is left as it is).
Tensor DecayedGrad(const Tensor& grad, float weight_decay, const Tensor& param) {
  if (weight_decay == 0.f) return grad.Reshape(param.shape());
  Tensor d(param.shape(), param.device(), param.data_type());
  d.CopyData(grad);
  Axpy(weight_decay, param, &d);
  return d;
}

// Elements [lo, hi) of a step, in the family the CPU runs.
void SgdRange(const cpu::SgdArgs& a, int64_t lo, int64_t hi) {
  SINGA_ISA_DISPATCH(SgdSpan(a, lo, hi));
}
void AdamRange(const cpu::AdamArgs& a, int64_t lo, int64_t hi) {
  SINGA_ISA_DISPATCH(AdamSpan(a, lo, hi));
}
void RmsRange(const cpu::RmsArgs& a, int64_t lo, int64_t hi) {
  SINGA_ISA_DISPATCH(RmsSpan(a, lo, hi));
}

// RMSProp's and AdaGrad's step: s = add * d * d + keep * s,
// param -= lr[0] * d / (sqrt(s) + epsilon), d = grad + weight_decay * param.
void RootMeanStep(const char* name, const Tensor& lr, double keep, double add, double epsilon,
                  double weight_decay, const Tensor& grad, Tensor* s, Tensor* param) {
  CheckStateTensors(name, grad, {s}, *param);
  CheckScalarTensor(name, "lr", lr, *param);
  const float kp = float(keep), ad = float(add), eps = float(epsilon), wd = float(weight_decay);
  if (!FusedStepFits(grad, {s}, *param)) {
    const Tensor d = DecayedGrad(grad, wd, *param);
    Tensor t(param->shape(), param->device(), param->data_type());
    SquareInto(d, &t);
    Axpby(ad, t, kp, s);
    SqrtInto(*s, &t);
    AddScalarInto(t, eps, &t);
    DivInto(d, t, &t);
    AxpyTensor(-1.f, lr, t, param);
    return;
  }
  if (param->Size() == 0) return;
  Tensor g = grad, ts = *s, p = *param, r = lr;
  param->device()->Exec(
      [g, ts, p, r, kp, ad, eps, wd](Context*) mutable {
        const int64_t n = static_cast<int64_t>(p.Size());
        const cpu::RmsArgs a{g.data<float>(), ts.mutable_data<float>(), p.mutable_data<float>(),
                             kp, ad, eps, wd, -1.f * r.data<float>()[0]};
        ParallelUpdate(n, a.p, [&a](int64_t lo, int64_t hi) { RmsRange(a, lo, hi); });
      },
      {g.block(), r.block(), ts.block(), p.block()}, {ts.block(), p.block()});
}
}  // namespace

void SGDMomentumStep(const Tensor& lr, float momentum, float weight_decay, bool nesterov,
                     const Tensor& grad, Tensor* buf, Tensor* param) {
  const char* name = "SGDMomentumStep";
  CheckStateTensors(name, grad, {buf}, *param);
  CheckScalarTensor(name, "lr", lr, *param);
  if (!FusedStepFits(grad, {buf}, *param)) {
    const Tensor d = DecayedGrad(grad, weight_decay, *param);
    Axpby(1.f, d, momentum, buf);
    AxpyTensor(-1.f, lr, nesterov ? d : *buf, param);
    if (nesterov) AxpyTensor(-momentum, lr, *buf, param);
    return;
  }
  if (param->Size() == 0) return;
  Tensor g = grad, b = *buf, p = *param, r = lr;
  param->device()->Exec(
      [g, b, p, r, momentum, weight_decay, nesterov](Context*) mutable {
        const int64_t n = static_cast<int64_t>(p.Size());
        const float lr_now = r.data<float>()[0];
        const cpu::SgdArgs a{g.data<float>(), b.mutable_data<float>(), p.mutable_data<float>(),
                             momentum, weight_decay, -1.f * lr_now, -momentum * lr_now,
                             nesterov};
        ParallelUpdate(n, a.p, [&a](int64_t lo, int64_t hi) { SgdRange(a, lo, hi); });
      },
      {g.block(), r.block(), b.block(), p.block()}, {b.block(), p.block()});
}

void AdamStep(const Tensor& step_size, const Tensor& v_scale, const Tensor& decay, double beta_1,
              double beta_2, double epsilon, double weight_decay, const Tensor& grad, Tensor* m,
              Tensor* v, Tensor* param) {
  const char* name = "AdamStep";
  CheckStateTensors(name, grad, {m, v}, *param);
  CheckScalarTensor(name, "step_size", step_size, *param);
  CheckScalarTensor(name, "v_scale", v_scale, *param);
  if (!decay.empty()) CheckScalarTensor(name, "decay", decay, *param);
  const float b1 = float(beta_1), c1 = float(1.0 - beta_1), b2 = float(beta_2),
              c2 = float(1.0 - beta_2), eps = float(epsilon), wd = float(weight_decay);
  if (!FusedStepFits(grad, {m, v}, *param)) {
    // The factors in the parameter's dtype (float16 has no mixed products).
    auto as_param = [param](const Tensor& x) {
      return x.data_type() == param->data_type() ? x : x.AsType(param->data_type());
    };
    if (!decay.empty()) MulInto(*param, as_param(decay), param);
    const Tensor d = DecayedGrad(grad, wd, *param);
    Axpby(c1, d, b1, m);
    Tensor t(param->shape(), param->device(), param->data_type());
    SquareInto(d, &t);
    Axpby(c2, t, b2, v);
    SqrtInto(*v, &t);
    MulInto(t, as_param(v_scale), &t);
    AddScalarInto(t, eps, &t);
    DivInto(*m, t, &t);
    AxpyTensor(-1.f, step_size, t, param);
    return;
  }
  if (param->Size() == 0) return;
  Tensor g = grad, tm = *m, tv = *v, p = *param, ss = step_size, vs = v_scale, dc = decay;
  const bool scaled = !decay.empty();
  param->device()->Exec(
      [g, tm, tv, p, ss, vs, dc, scaled, b1, c1, b2, c2, eps, wd](Context*) mutable {
        const int64_t n = static_cast<int64_t>(p.Size());
        const float scale = scaled ? dc.data<float>()[0] : 1.f;
        const cpu::AdamArgs a{g.data<float>(), tm.mutable_data<float>(), tv.mutable_data<float>(),
                              p.mutable_data<float>(), b1, c1, b2, c2, eps, wd,
                              -1.f * ss.data<float>()[0], vs.data<float>()[0], scale, scaled};
        ParallelUpdate(n, a.p, [&a](int64_t lo, int64_t hi) { AdamRange(a, lo, hi); });
      },
      {g.block(), ss.block(), vs.block(), scaled ? dc.block() : nullptr, tm.block(), tv.block(),
       p.block()},
      {tm.block(), tv.block(), p.block()});
}

void RMSPropStep(const Tensor& lr, double rho, double epsilon, double weight_decay,
                 const Tensor& grad, Tensor* running_average, Tensor* param) {
  RootMeanStep("RMSPropStep", lr, rho, 1.0 - rho, epsilon, weight_decay, grad, running_average,
               param);
}

void AdaGradStep(const Tensor& lr, double epsilon, double weight_decay, const Tensor& grad,
                 Tensor* history, Tensor* param) {
  RootMeanStep("AdaGradStep", lr, 1.0, 1.0, epsilon, weight_decay, grad, history, param);
}

}  // namespace singa
