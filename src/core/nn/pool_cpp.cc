// 2-D max and average pooling: argument checks and the per-call plan; the
// loops are in pool_isa.cc, compiled per ISA family.
#include <algorithm>
#include <climits>
#include <cstddef>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "singa/core/nn_kernels.h"

#include "nn_isa.h"

#include "window.h"

namespace singa {
namespace cpu {

namespace {

std::string Describe(const PoolParams& p) {
  std::ostringstream os;
  os << "Pool2d: input [" << p.n << ", " << p.c << ", " << p.h << ", " << p.w
     << "], kernel " << p.kh << "x" << p.kw << ", stride " << p.sh << "x"
     << p.sw << ", dilation " << p.dh << "x" << p.dw << ", pads (t="
     << p.pad_t << ", l=" << p.pad_l << ", b=" << p.pad_b
     << ", r=" << p.pad_r << "), ceil_mode " << p.ceil_mode;
  return os.str();
}

// Number of taps k in [0, kernel) whose position start + k * dil falls in
// [lo, hi).
inline int CountTaps(int start, int kernel, int dil, int lo, int hi) {
  int cnt = 0;
  for (int k = 0; k < kernel; ++k) {
    const int pos = start + k * dil;
    cnt += (pos >= lo && pos < hi);
  }
  return cnt;
}

// Everything about a pooling call that does not depend on the plane,
// computed once instead of per plane and row.
struct Plan {
  int oh, ow;
  // Per kernel column kj: input offset of the tap relative to ox * sw, and
  // the output columns [lo, hi) for which it lands inside the row.
  std::vector<int> off, lo, hi;
  // Average pooling divisor of output (oy, ox) is rows[oy] * cols[ox]: the
  // window is a Cartesian product, so the counted cells factor per axis.
  std::vector<int> rows, cols;
  PoolPlan view() const {
    return PoolPlan{oh,        ow,        off.data(), lo.data(), hi.data(),
                    rows.data(), cols.data()};
  }
};

Plan MakePlan(const PoolParams& p, bool divisors) {
  Plan pl;
  pl.oh = p.oh();
  pl.ow = p.ow();
  pl.off.resize(p.kw);
  pl.lo.resize(p.kw);
  pl.hi.resize(p.kw);
  for (int kj = 0; kj < p.kw; ++kj) {
    pl.off[kj] = kj * p.dw - p.pad_l;
    ValidRange(pl.ow, p.sw, pl.off[kj], p.w, &pl.lo[kj], &pl.hi[kj]);
  }
  if (!divisors) return pl;
  pl.rows.resize(pl.oh);
  pl.cols.resize(pl.ow);
  const int ylo = p.count_include_pad ? -p.pad_t : 0;
  const int yhi = p.count_include_pad ? p.h + p.pad_b : p.h;
  const int xlo = p.count_include_pad ? -p.pad_l : 0;
  const int xhi = p.count_include_pad ? p.w + p.pad_r : p.w;
  for (int oy = 0; oy < pl.oh; ++oy)
    pl.rows[oy] = CountTaps(oy * p.sh - p.pad_t, p.kh, p.dh, ylo, yhi);
  for (int ox = 0; ox < pl.ow; ++ox)
    pl.cols[ox] = CountTaps(ox * p.sw - p.pad_l, p.kw, p.dw, xlo, xhi);
  return pl;
}

}  // namespace

int PoolParams::oh() const {
  return WindowOutputSize(h, kh, sh, pad_t, pad_b, dh, ceil_mode);
}

int PoolParams::ow() const {
  return WindowOutputSize(w, kw, sw, pad_l, pad_r, dw, ceil_mode);
}

void PoolParams::Validate() const {
  if (n <= 0 || c <= 0 || h <= 0 || w <= 0 || kh <= 0 || kw <= 0 ||
      sh <= 0 || sw <= 0 || dh <= 0 || dw <= 0)
    throw std::invalid_argument(Describe(*this) +
                                ": all sizes must be positive");
  if (pad_t < 0 || pad_l < 0 || pad_b < 0 || pad_r < 0)
    throw std::invalid_argument(Describe(*this) +
                                ": pads must be non-negative");
  // argmax is an int32 index into one plane.
  if (long(h) * long(w) > long(INT32_MAX))
    throw std::invalid_argument(Describe(*this) +
                                ": plane too large for int32 argmax");
  if (oh() <= 0 || ow() <= 0)
    throw std::invalid_argument(Describe(*this) +
                                ": kernel does not fit, output is empty");
}

void MaxPool2dForward(const float* x, float* y, int32_t* argmax,
                      const PoolParams& p) {
  p.Validate();
  const Plan pl = MakePlan(p, false);
  SINGA_ISA_DISPATCH(MaxPoolForward(x, y, argmax, p, pl.view()));
}

size_t MaxPool2dBackward(const float* dy, const int32_t* argmax, float* dx,
                         const PoolParams& p) {
  p.Validate();
  if (!argmax)
    throw std::invalid_argument(
        Describe(p) + ": MaxPool2dBackward needs the argmax of the forward");
  const Plan pl = MakePlan(p, false);
  SINGA_ISA_DISPATCH(MaxPoolBackward(dy, argmax, dx, p, pl.view()));
}

void AvgPool2dForward(const float* x, float* y, const PoolParams& p) {
  p.Validate();
  const Plan pl = MakePlan(p, true);
  SINGA_ISA_DISPATCH(AvgPoolForward(x, y, p, pl.view()));
}

void AvgPool2dBackward(const float* dy, float* dx, const PoolParams& p) {
  p.Validate();
  const Plan pl = MakePlan(p, true);
  SINGA_ISA_DISPATCH(AvgPoolBackward(dy, dx, p, pl.view()));
}

}  // namespace cpu
}  // namespace singa
