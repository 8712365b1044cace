// Direct data gradient for convolutions with few input channels.
//
// The implicit-GEMM engine (conv_engine.h) computes dx with the input
// channels as the rows of its register tile; with one to four of them (a
// network's first layer: LeNet's 1, an RGB stem's 3) that tile is nearly
// empty, and the scatter form instead adds every partial sum into dx
// through kh * kw overlapping windows. Here dx is a correlation of the
// zero-extended dy with the flipped kernel, computed per image and input
// channel with the pixels in the vector lanes: a register tile of dx rows
// accumulates the whole sum over output channels and taps, each dy vector
// it loads serving every kernel row that reaches a tile row, and is stored
// once (no zero fill, no read-modify-write of dx). Images whose rows would
// leave much of a tile's width unused are done a few at a time, side by
// side in the packed rows (conv_direct_isa.cc).
//
// Stride 1 and dilation 1, one group, kernels up to kDirectDxMaxK rows.
#ifndef SINGA_SRC_CORE_NN_CONV_DIRECT_H_
#define SINGA_SRC_CORE_NN_CONV_DIRECT_H_

#include <cstddef>

#include "singa/core/cpu_isa.h"

namespace singa {
namespace cpu {

constexpr int kDirectDxMaxK = 7;

struct DirectDxJob {
  const float* dy;  // [n][mg][oh][ow]
  const float* wf;  // [c][mg][kh][kw], each kernel flipped in both axes
  float* dx;        // [n][c][h][w], written (not accumulated)
  int n, c, h, w;
  int mg, oh, ow;
  int kh, kw, pad_t, pad_l, pad_r;
};

SINGA_ISA_DECLARE(
    // Floats of scratch (the zero-extended dy of one image) DirectDxImage
    // needs.
    size_t DirectDxWorkFloats(const DirectDxJob& job);
    // Prepares `work` (64-byte aligned) for DirectDxImage calls of this job.
    void DirectDxClear(const DirectDxJob& job, float* work);
    // Images one DirectDxImage call computes (its group).
    int DirectDxGroup(const DirectDxJob& job);
    // dx of the group of images from b (b a multiple of the group size; the
    // last group may be short), all their channels.
    void DirectDxImage(const DirectDxJob& job, int b, float* work);)

}  // namespace cpu
}  // namespace singa

#endif  // SINGA_SRC_CORE_NN_CONV_DIRECT_H_
