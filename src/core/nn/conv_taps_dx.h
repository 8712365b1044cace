// Tap-scatter data gradient for convolutions with few input channels.
//
// dx[c][y + i - pad_t][x + j - pad_l] += w[m][c][i][j] * dy[m][y][x], summed
// over output channels m: every tap (c, i, j) is one row of the product
// w^T dy, and its results are added into dx shifted by the tap. Here a
// register tile holds the kh taps of one kernel column (c, j) for a few
// vectors of dy pixels (copied, over all output channels, into a small
// buffer that the c * kw tiles of those pixels share), sums them over all
// output channels, and adds each row into dx once. The kh rows of a tile
// land on different dx rows and its vectors on different pixels, so no two
// of its adds touch the same floats. Only the multiply-adds the layer counts
// are run: unlike a correlation of the zero-extended dy (the direct form
// this replaced, which also copied each image's dy into a padded buffer),
// no lane computes the border, where most taps fall outside dy. On AVX2
// (Zen 4, alternating call by call with that form) LeNet's first layer
// took 0.63-0.70x its time at batch 8 and 64 (0.90x in one of the host's
// slow spells), ResNet-18's stem (3 -> 64 channels, 32x32) 0.71-0.75x at
// batch 32 and 64, before its tiles took four spots instead of three
// (0.80-0.84x again) and its pack went plane by plane (0.80-0.86x again).
//
// Stride 1 and dilation 1, one group, kernels up to kTapsDxMaxK rows.
#ifndef SINGA_SRC_CORE_NN_CONV_TAPS_DX_H_
#define SINGA_SRC_CORE_NN_CONV_TAPS_DX_H_

#include <cstddef>

#include "singa/core/cpu_isa.h"

namespace singa {
namespace cpu {

constexpr int kTapsDxMaxK = 7;

struct TapsDxJob {
  const float* dy;  // [n][mg][oh][ow]
  const float* wt;  // [c][kw][mg][kh]: wt[((c * kw + j) * mg + m) * kh + i]
  float* dx;        // [n][c][h][w], written (not accumulated)
  int n, c, h, w;
  int mg, oh, ow;
  int kh, kw, pad_t, pad_l;
};

SINGA_ISA_DECLARE(
    // Floats of per-thread scratch TapsDxImage needs (64-byte aligned).
    size_t TapsDxWorkFloats(const TapsDxJob& job);
    // dx of image b, all its channels.
    void TapsDxImage(const TapsDxJob& job, int b, float* work);)

}  // namespace cpu
}  // namespace singa

#endif  // SINGA_SRC_CORE_NN_CONV_TAPS_DX_H_
