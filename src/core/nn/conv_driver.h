// What the convolution passes' drivers share: conv_cpp.cc (forward, weight
// gradient) defines these, conv_dx_cpp.cc (data gradient) uses them too.
#ifndef SINGA_SRC_CORE_NN_CONV_DRIVER_H_
#define SINGA_SRC_CORE_NN_CONV_DRIVER_H_

#include <cstdint>
#include <vector>

#include "singa/core/nn_kernels.h"

#include "conv_engine.h"

namespace singa {
namespace cpu {

// Reduction blocks of the NN product: one block up to kMaxKc taps.
constexpr int kMaxKc = 768;

inline int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// dst[c * rows + r] = src[r * cols + c].
void Transpose(const float* src, int64_t rows, int64_t cols, float* dst);

// The reduction block of an NN product with K rows: all of it when short,
// else near-equal pieces of about 512.
int ChooseKc(int K);

// Runs NN jobs over the threads (see conv_cpp.cc).
void RunNn(std::vector<NnJob>& jobs);

// The taps of a forward window, as conv_engine.h's B rows: row
// k = (cc * kh + ki) * kw + kj of a group reads input channel cc at offset
// (ki * dh - pad_t, kj * dw - pad_l) from the window origin, which matches the
// weight layout [oc][cg][kh][kw].
struct ForwardTaps {
  std::vector<int> offy, offx;
};

ForwardTaps MakeForwardTaps(const ConvParams& p);

// The B rows of group g's forward taps over x.
TapRows InputRows(const float* x, const ConvParams& p, const ForwardTaps& t, int g);

}  // namespace cpu
}  // namespace singa

#endif  // SINGA_SRC_CORE_NN_CONV_DRIVER_H_
