// Winograd F(4x4, 3x3) and F(2x2, 3x3) convolution for 3x3, stride-1,
// dilation-1, ungrouped layers (forward, and the data gradient, which is
// the same kind of convolution of dy with the flipped, channel-transposed
// kernel).
//
// With T x T output tiles (T = 4 or 2) read from (T + 2) x (T + 2) input
// windows d (stride T), the output tile of one output channel k is
//   y = A^T [ sum_c (G g_kc G^T) .* (B^T d_c B) ] A,
// so (T + 2)^2 multiply-adds per (k, c) pair and tile replace 9 T^2 of the
// direct form: 36 for 144 with 4x4 tiles, 16 for 36 with 2x2. The sum over
// c is, for each transform position xi, a matrix product M[xi] = U[xi]
// V[xi] of the transformed weights (K x C) and the transformed input tiles
// (C x tiles): that product runs in register tiles like any GEMM, and is
// where the time goes. The 4x4 tiles save more, but a small plane gives
// few of them (an 8x8 plane four), and a panel of tiles costs the same
// however few of its lanes are used: the 2x2 tiles serve such planes.
//
// Layouts (R = WinoRows(), PW = WinoPanel(), Kp = K rounded up to R):
//   U[xi][k / R][c][k % R]          zero for k >= K
//   V[xi][panel][c][lane]           one block of tiles, PW lanes per panel
//   M[k][panel][xi][lane]
// Tiles are numbered t = (b * th + ty) * tw + tx over the batch, with
// th = ceil(oh / T), tw = ceil(ow / T); a block is a range of tiles, and
// blocks are independent (each writes only its own tiles' outputs).
#ifndef SINGA_SRC_CORE_NN_WINOGRAD_H_
#define SINGA_SRC_CORE_NN_WINOGRAD_H_

#include <cstddef>
#include <cstdint>

#include "singa/core/cpu_isa.h"
#include "singa/core/nn_kernels.h"

#include "path_mode.h"

namespace singa {
namespace cpu {

// dst[b][k][oy][ox] = bias[k] + sum_{c,i,j} g[k][c][i][j]
//                      * src[b][c][oy - pad_t + i][ox - pad_l + j],
// reading zero outside the src planes.
struct WinoJob {
  const float* src;  // [n][C][sh][sw]
  int n, C, sh, sw;
  int K, oh, ow;
  int pad_t, pad_l;
  const float* U;     // transformed weights (layout above), or null:
  const float* w;     // then WinoBlock transforms w itself, a row block
  bool flip;          // at a time (see WinoWeights for w and flip)
  const float* bias;  // may be null
  float* dst;         // [n][K][oh][ow]
  int tile;           // T: 4 or 2
  // Transform positions: 36 for 4x4 tiles, 16 for 2x2.
  int positions() const { return (tile + 2) * (tile + 2); }
  int th() const { return (oh + tile - 1) / tile; }
  int tw() const { return (ow + tile - 1) / tile; }
  int64_t tiles() const { return int64_t(n) * th() * tw(); }
};

// The driver (winograd_cpp.cc), called by conv_cpp.cc and conv_dx_cpp.cc:
// runs the pass through Winograd and returns true when the layer qualifies
// (3x3, stride 1, dilation 1, one group; pads at most 2 for the data
// gradient) and the current mode allows it, else returns false and does
// nothing.
bool WinogradForward(const float* x, const float* w, const float* b, float* y,
                     const ConvParams& p);
bool WinogradBackwardData(const float* dy, const float* w, float* dx,
                          const ConvParams& p);

// kAuto (the default) takes Winograd where it was measured to be faster
// than the implicit GEMM; kForce for every layer that qualifies (tests);
// kOff never. The environment variable SINGA_WINOGRAD=off|auto|force sets
// the starting mode.
using WinogradMode = PathMode;
void SetWinogradMode(WinogradMode mode);
WinogradMode GetWinogradMode();
// The output tile side: 0 (the default) picks per layer (TileFor in
// winograd_cpp.cc), 4 or 2 fixes it (for the tests).
void SetWinogradTile(int tile);
// The tile side WinogradForward takes for p, 0 where it declines.
int WinogradForwardTile(const ConvParams& p);

SINGA_ISA_DECLARE(
    // Rows of U per register tile, and tiles per panel (the lanes of the
    // register tile's columns).
    int WinoRows();
    int WinoPanel();
    // Tiles up to which one panel computes a single vector of lanes
    // (WinoBlock's narrow product, with a shared U); WinoPanel() where a
    // panel is one vector.
    int WinoNarrowPanel();
    // Floats of U for a tile side (its slices are padded apart).
    size_t WinoWeightFloats(int K, int C, int tile);
    // U for row blocks [kb0, kb1) of K. The kernel g is w[k][c][3][3]
    // (forward) or, with `flip`, w[c][k][2 - i][2 - j] (data gradient, w
    // being the forward weight [C][K][3][3]).
    void WinoWeights(const float* w, int K, int C, bool flip, int tile,
                     float* U, int kb0, int kb1);
    // Floats of scratch WinoBlock needs for blocks of up to `tiles` tiles.
    size_t WinoWorkFloats(const WinoJob& job, int64_t tiles);
    // Computes the outputs of tiles [t0, t1) for the output channels of
    // row blocks [kb0, kb1) of U. `work` is 64-byte aligned.
    void WinoBlock(const WinoJob& job, int64_t t0, int64_t t1, int kb0,
                   int kb1, float* work);)

}  // namespace cpu
}  // namespace singa

#endif  // SINGA_SRC_CORE_NN_WINOGRAD_H_
