// "Flat-shift" forward and weight gradient for stride-1 convolutions with a
// short reduction.
//
// Each image is copied into a zero-padded plane xp (c x hp x wp). Output
// pixels are then numbered in the padded row width: q = oy * wp + ox for
// q < (oh - 1) * wp + ow. Tap k = (cc, i, j) of output q reads
// xp[off[k] + q] with off[k] = (cc * hp + i) * wp + j, so every row of the
// implicit GEMM's B operand is a contiguous slice of xp and the micro-kernel
// loads it in place: nothing is packed per tile. Columns with q % wp >= ow
// are computed but never stored: a vector that holds such columns has its
// valid lanes moved to the front and is stored so that its tail lands on
// outputs stored later (conv_shift_isa.cc). The reduction (c * kh * kw) must
// fit in one block, kShiftMaxK.
//
// Stride 1, dilation 1, one group. Threads take whole images.
#ifndef SINGA_SRC_CORE_NN_CONV_SHIFT_H_
#define SINGA_SRC_CORE_NN_CONV_SHIFT_H_

#include <cstddef>

#include "singa/core/cpu_isa.h"

#include "path_mode.h"

namespace singa {
namespace cpu {

constexpr int kShiftMaxK = 64;

// The layer's geometry, shared by both passes: hp x wp is the padded plane.
struct ShiftPlane {
  int c, h, w, M;
  int kh, kw, pad_t, pad_l;
  int oh, ow, hp, wp;
};

struct ShiftJob : ShiftPlane {
  const float* x;     // [n][c][h][w]
  const float* wt;    // [M][c * kh * kw]
  const float* bias;  // [M] or null
  float* y;           // [n][M][oh][ow], written
};

SINGA_ISA_DECLARE(
    // Floats of scratch (the padded plane and its slack) ShiftImage needs.
    size_t ShiftWorkFloats(const ShiftJob& job);
    // Zeroes the parts of `work` (64-byte aligned) no image overwrites.
    void ShiftClear(const ShiftJob& job, float* work);
    // All output channels of image b.
    void ShiftImage(const ShiftJob& job, int b, float* work);)

// The weight gradient of the same layers: dw[m][k] = sum over images, output
// rows r and columns x of dy[m][r * ow + x] * xp[off[k] + r * wp + x], as
// lane-wise dot products (conv_engine.h's NT form with both operands read in
// place, row by row).
struct ShiftDwJob : ShiftPlane {
  const float* x;   // [n][c][h][w]
  const float* dy;  // [n][M][oh][ow]
  int n;            // images in x and dy
};

SINGA_ISA_DECLARE(
    // Floats of scratch (padded plane, lane sums) the calls need.
    size_t ShiftDwWorkFloats(const ShiftDwJob& job);
    // Zeroes `work` (64-byte aligned): the sums and all padding.
    void ShiftDwClear(const ShiftDwJob& job, float* work);
    // Adds image b's products into the sums in `work`.
    void ShiftDwImage(const ShiftDwJob& job, int b, float* work);
    // dw[m * K + k] = the sums' lanes added up (written, not accumulated).
    void ShiftDwFinish(const ShiftDwJob& job, const float* work, float* dw);)

struct ConvParams;

// Run the pass and return true when the layer takes the flat-shift path
// (conv_shift_cpp.cc); false, touching nothing, otherwise. p is validated.
bool ShiftForward(const float* x, const float* w, const float* b, float* y,
                  const ConvParams& p);
bool ShiftBackwardWeight(const float* x, const float* dy, float* dw,
                         const ConvParams& p);

// How Conv2dForward and Conv2dBackwardWeight pick the path: kAuto for the shapes where it was
// measured faster than the implicit GEMM, kForce for every layer that
// qualifies (tests), kOff never. SINGA_CONV_SHIFT=off|auto|force sets the
// initial mode.
using ShiftMode = PathMode;
void SetShiftMode(ShiftMode mode);
ShiftMode GetShiftMode();

}  // namespace cpu
}  // namespace singa

#endif  // SINGA_SRC_CORE_NN_CONV_SHIFT_H_
