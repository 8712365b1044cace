// The fused optimizer steps' element loops for one ISA family (see
// optim_step.h).
#include <cmath>
#include <cstdint>

#include "optim_step.h"

#ifndef SINGA_ISA_NS
#error "optim_step_isa.cc is compiled per ISA: define SINGA_ISA_NS"
#endif

namespace singa {
namespace cpu {
namespace SINGA_ISA_NS {

namespace {

// Each step rounds as Axpy, Axpby and AxpyTensor do.
template <bool kDecay, bool kNesterov>
void Sgd(const SgdArgs& a, int64_t lo, int64_t hi) {
  const float* __restrict g = a.g;
  float* __restrict b = a.b;
  float* __restrict p = a.p;
  const float mom = a.momentum, wd = a.weight_decay, k = a.k, km = a.km;
#pragma omp simd
  for (int64_t i = lo; i < hi; ++i) {
    const float d = kDecay ? wd * p[i] + 1.f * g[i] : g[i];
    const float v = 1.f * d + mom * b[i];
    b[i] = v;
    float q = p[i];
    if (kNesterov) q = k * d + 1.f * q;
    p[i] = (kNesterov ? km : k) * v + 1.f * q;
  }
}

// Each step rounds as MulInto, Axpy, Axpby, SquareInto, SqrtInto, MulInto,
// AddScalarInto, DivInto and AxpyTensor do.
template <bool kScale, bool kDecay>
void Adam(const AdamArgs& a, int64_t lo, int64_t hi) {
  const float* __restrict g = a.g;
  float* __restrict m = a.m;
  float* __restrict v = a.v;
  float* __restrict p = a.p;
  const float b1 = a.b1, c1 = a.c1, b2 = a.b2, c2 = a.c2, eps = a.eps;
  const float wd = a.weight_decay, k = a.k, vs = a.v_scale, scale = a.scale;
#pragma omp simd
  for (int64_t i = lo; i < hi; ++i) {
    float q = p[i];
    if (kScale) q = q * scale;
    const float d = kDecay ? wd * q + 1.f * g[i] : g[i];
    const float mi = c1 * d + b1 * m[i];
    const float vi = c2 * (d * d) + b2 * v[i];
    m[i] = mi;
    v[i] = vi;
    p[i] = k * (mi / (std::sqrt(vi) * vs + eps)) + 1.f * q;
  }
}

// Each step rounds as Axpy, SquareInto, Axpby (or AddInto), SqrtInto,
// AddScalarInto, DivInto and AxpyTensor do.
template <bool kDecay>
void Rms(const RmsArgs& a, int64_t lo, int64_t hi) {
  const float* __restrict g = a.g;
  float* __restrict s = a.s;
  float* __restrict p = a.p;
  const float keep = a.keep, add = a.add, eps = a.eps, wd = a.weight_decay, k = a.k;
#pragma omp simd
  for (int64_t i = lo; i < hi; ++i) {
    const float q = p[i];
    const float d = kDecay ? wd * q + 1.f * g[i] : g[i];
    const float si = add * (d * d) + keep * s[i];
    s[i] = si;
    p[i] = k * (d / (std::sqrt(si) + eps)) + 1.f * q;
  }
}

}  // namespace

void SgdSpan(const SgdArgs& a, int64_t lo, int64_t hi) {
  const bool decay = a.weight_decay != 0.f;
  if (decay)
    a.nesterov ? Sgd<true, true>(a, lo, hi) : Sgd<true, false>(a, lo, hi);
  else
    a.nesterov ? Sgd<false, true>(a, lo, hi) : Sgd<false, false>(a, lo, hi);
}

void AdamSpan(const AdamArgs& a, int64_t lo, int64_t hi) {
  const bool decay = a.weight_decay != 0.f;
  if (a.scaled)
    decay ? Adam<true, true>(a, lo, hi) : Adam<true, false>(a, lo, hi);
  else
    decay ? Adam<false, true>(a, lo, hi) : Adam<false, false>(a, lo, hi);
}

void RmsSpan(const RmsArgs& a, int64_t lo, int64_t hi) {
  a.weight_decay != 0.f ? Rms<true>(a, lo, hi) : Rms<false>(a, lo, hi);
}

}  // namespace SINGA_ISA_NS
}  // namespace cpu
}  // namespace singa
