// Shared harness for the standalone nn-kernel test (test_nn_*.cc): the
// includes, the pass/fail counters and Report, the deterministic RNG,
// the error measures and checks (RelErr, Check, CheckFD, Throws) and the
// double helpers D and Dot. Everything is inline so that every file of
// the test shares one set of counters and one RNG state.
#ifndef SINGA_TEST_CPP_NN_TEST_UTIL_H_
#define SINGA_TEST_CPP_NN_TEST_UTIL_H_

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include <omp.h>

#include "singa/core/cpu_isa.h"
#include "singa/core/nn_kernels.h"
#include "batchnorm.h"
#include "conv_engine.h"
#include "conv_shift.h"
#include "winograd.h"
#include "weight_cache.h"
#include "winograd_weight.h"

using namespace singa::cpu;
using Vec = std::vector<float>;
using DVec = std::vector<double>;

inline int g_pass = 0, g_fail = 0;
// The ISA family the kernels run with, named in failure messages.
inline std::string g_isa = "baseline";

inline void Report(bool ok, const std::string& what, double err = 0) {
  if (ok) {
    ++g_pass;
  } else {
    ++g_fail;
    std::printf("FAIL [%s] %s (err %.3g)\n", g_isa.c_str(), what.c_str(),
                err);
  }
}

inline uint64_t g_rng = 0x9e3779b97f4a7c15ULL;
inline float Uniform() {
  g_rng ^= g_rng << 13;
  g_rng ^= g_rng >> 7;
  g_rng ^= g_rng << 17;
  return float((g_rng >> 11) * (1.0 / 9007199254740992.0)) * 2.f - 1.f;
}
inline Vec Random(size_t n) {
  Vec v(n);
  for (auto& e : v) e = Uniform();
  return v;
}

// Max error relative to the largest reference magnitude; infinities must
// match exactly and NaNs must appear in the same places.
inline double RelErr(const float* got, const double* ref, size_t n) {
  double scale = 1e-6, err = 0;
  for (size_t i = 0; i < n; ++i)
    if (std::isfinite(ref[i])) scale = std::max(scale, std::fabs(ref[i]));
  for (size_t i = 0; i < n; ++i) {
    if (std::isnan(ref[i]) || std::isnan(got[i])) {
      if (std::isnan(ref[i]) != std::isnan(got[i])) return INFINITY;
    } else if (std::isinf(ref[i]) || std::isinf(got[i])) {
      if (double(got[i]) != ref[i]) return INFINITY;
    } else {
      err = std::max(err, std::fabs(got[i] - ref[i]) / scale);
    }
  }
  return err;
}

inline void Check(const std::string& what, const Vec& got, const DVec& ref,
                  double tol = 2e-5) {
  if (got.size() != ref.size()) return Report(false, what + " size", 0);
  const double e = RelErr(got.data(), ref.data(), got.size());
  Report(e <= tol, what, e);
}

// Central differences of a scalar function of `in` at up to `max_pts`
// coordinates, compared with the analytic gradient `grad`.
inline void CheckFD(const std::string& what, const Vec& in,
                    const std::function<double(const DVec&)>& loss,
                    const Vec& grad, size_t max_pts = 48, double step = 1e-3,
                    double tol = 1e-4) {
  DVec x(in.begin(), in.end());
  const size_t stride = std::max<size_t>(1, in.size() / max_pts);
  double scale = 1e-6, err = 0;
  DVec fd;
  std::vector<size_t> idx;
  for (size_t i = 0; i < in.size(); i += stride) {
    const double keep = x[i];
    x[i] = keep + step;
    const double lp = loss(x);
    x[i] = keep - step;
    const double lm = loss(x);
    x[i] = keep;
    fd.push_back((lp - lm) / (2 * step));
    idx.push_back(i);
    scale = std::max(scale, std::fabs(fd.back()));
  }
  for (size_t k = 0; k < idx.size(); ++k)
    err = std::max(err, std::fabs(grad[idx[k]] - fd[k]) / scale);
  Report(err <= tol, what + " vs finite differences", err);
}

template <typename F>
inline bool Throws(F f) {
  try {
    f();
  } catch (const std::invalid_argument&) {
    return true;
  }
  return false;
}

inline DVec D(const Vec& v) { return DVec(v.begin(), v.end()); }

inline double Dot(const DVec& a, const DVec& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

#endif  // SINGA_TEST_CPP_NN_TEST_UTIL_H_
