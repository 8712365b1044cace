// Weight gradient of 3x3, stride-1 convolutions by Winograd's minimal
// filtering: the 3x3 correlation of each input tile with the matching tile
// of dy, in one of two tilings (WinogradWeightTile picks):
//   F(3x3, 2x2): 4x4 x tiles at stride 2, 2x2 dy tiles, 16 multiplies per
//                tile instead of 36;
//   F(3x3, 4x4): 6x6 x tiles at stride 4, 4x4 dy tiles, 36 multiplies per
//                tile instead of 144, with larger transforms.
//
// With tiles taken over the output grid (dy zero past its edge, x zero in
// the padding),
//   dw[k][c] = sum over images and tiles of  A^T [Z[k] (.) V[c]] A,
//   V = B^T d B  (d: the x tile),  Z = G g G^T  (g: the dy tile),
// so the sum over tiles becomes one product per transform position:
//   M[pos][k][c] = sum_t Z[pos][t][k] * V[pos][t][c], and dw = A^T M A.
// These are the forward algorithm's F(2x2, 3x3) and F(4x4, 3x3) with the
// roles of its matrices exchanged (B the same, A and G swapped). For 2x2
// tiles (rows; points 0, 1, -1 and infinity):
//   B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 -1 0 1]
//   G   = [1 0; 1/2 1/2; 1/2 -1/2; 0 1]
//   A^T = [1 1 1 0; 0 1 -1 0; 0 1 1 1]
// and for 4x4 tiles (points 0, +-1, +-2 and infinity):
//   B^T = [4 0 -5 0 1 0; 0 -4 -4 1 1 0; 0 4 -4 -1 1 0;
//          0 -2 -1 2 1 0; 0 2 -1 -2 1 0; 0 4 0 -5 0 1]
//   G   = [1 0 0 0; 1 1 1 1; 1 -1 1 -1; 1 2 4 8; 1 -2 4 -8; 0 0 0 1]
//   A^T = [1/4 -1/6 -1/6 1/24 1/24 0; 0 -1/6 1/6 1/12 -1/12 0;
//          0 -1/6 -1/6 1/6 1/6 1]
// (the factors of A are applied to M, once per weight, not per tile).
// winograd_weight_isa.cc holds the transforms and the product per ISA
// family; Conv2dBackwardWeight (conv_cpp.cc) hands it the eligible calls.
#ifndef SINGA_SRC_CORE_NN_WINOGRAD_WEIGHT_H_
#define SINGA_SRC_CORE_NN_WINOGRAD_WEIGHT_H_

#include "singa/core/cpu_isa.h"
#include "singa/core/nn_kernels.h"

namespace singa {
namespace cpu {

// Writes dw and returns true, or returns false (dw untouched) when its
// scratch memory cannot be allocated. tile is 2 or 4 (the dy tile's side).
SINGA_ISA_DECLARE(bool WinogradWeightGradient(const float* x, const float* dy,
                                              float* dw, const ConvParams& p,
                                              int tile);)

// The dy tile side for p: 4 or 2, whichever costs less in a model fitted
// to measurements (AVX2 EPYC, 1 and 2 threads, ResNet-18's layers at batch
// 1 to 64): per weight, kPos * (tiles + m), with the tiles of the whole
// batch and m = 4 + sqrt(K C) / 24 the cost of writing and reading M in
// units of a tile's multiply-adds (M outgrows the caches with the
// channels). The 4x4 tiles took 0.65-0.8x the time from 8 tiles of them
// with 64 channels, 16 with 256 and 32 with 512, and up to 3x the time on a
// few tiles with 512 channels. SetWinogradWeightTile(2 or 4) fixes the
// choice for the tests; 0 restores the rule. (winograd_cpp.cc)
int WinogradWeightTile(const ConvParams& p);
void SetWinogradWeightTile(int tile);

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
  const int tile = WinogradWeightTile(p);
  SINGA_ISA_DISPATCH(WinogradWeightGradient(x, dy, dw, p, tile));
}

}  // namespace cpu
}  // namespace singa

#endif  // SINGA_SRC_CORE_NN_WINOGRAD_WEIGHT_H_
