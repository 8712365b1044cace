// Weight gradient of 3x3, stride-1 convolutions by Winograd's minimal
// filtering F(3x3, 2x2): the 3x3 correlation of each 4x4 input tile with
// the matching 2x2 tile of dy costs 16 multiplies instead of 36.
//
// With tiles taken at stride 2 over the output grid (dy zero past its edge,
// x zero in the padding),
//   dw[k][c] = sum over images and tiles of  A^T [Z[k] (.) V[c]] A,
//   V = B^T d B  (d: the 4x4 x tile),  Z = G g G^T  (g: the 2x2 dy tile),
// so the sum over tiles becomes one product per transform position:
//   M[pos][k][c] = sum_t Z[pos][t][k] * V[pos][t][c], and dw = A^T M A.
// The matrices (rows; 0, 1, -1 and infinity as the points):
//   B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 -1 0 1]
//   G   = [1 0; 1/2 1/2; 1/2 -1/2; 0 1]
//   A^T = [1 1 1 0; 0 1 -1 0; 0 1 1 1]
// winograd_weight_isa.cc holds the transforms and the product per ISA
// family; Conv2dBackwardWeight (conv_cpp.cc) hands it the eligible calls.
#ifndef SINGA_SRC_CORE_NN_WINOGRAD_WEIGHT_H_
#define SINGA_SRC_CORE_NN_WINOGRAD_WEIGHT_H_

#include "singa/core/cpu_isa.h"
#include "singa/core/nn_kernels.h"

namespace singa {
namespace cpu {

// Writes dw and returns true, or returns false (dw untouched) when its
// scratch memory cannot be allocated.
SINGA_ISA_DECLARE(bool WinogradWeightGradient(const float* x, const float* dy,
                                              float* dw, const ConvParams& p);)

// Whether the Winograd weight gradient serves p (already validated): a 3x3,
// stride-1, undilated, ungrouped convolution with channels enough for the
// transforms to pay. Measured at 1 thread on an AVX2 EPYC against the direct
// kernel (batch 32, 4x4 to 32x32 planes): 1.05-1.3x with 16 input and 16
// output channels, 1.7-2.8x from 32 (or 16 in, 64 out), 0.86x with 8 input
// channels (the products run on input channels padded to two vectors).
inline bool WinogradWeightEligible(const ConvParams& p) {
  return p.groups == 1 && p.kh == 3 && p.kw == 3 && p.sh == 1 && p.sw == 1 &&
         p.dh == 1 && p.dw == 1 && p.c >= 16 && p.oc >= 8;
}

inline bool RunWinogradWeight(const float* x, const float* dy, float* dw,
                              const ConvParams& p) {
  SINGA_ISA_DISPATCH(WinogradWeightGradient(x, dy, dw, p));
}

}  // namespace cpu
}  // namespace singa

#endif  // SINGA_SRC_CORE_NN_WINOGRAD_WEIGHT_H_
