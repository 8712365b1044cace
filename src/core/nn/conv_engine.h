// The implicit-GEMM convolution engine shared by the conv kernels.
//
// Every convolution pass is one of two matrix products whose operand rows
// are read straight from an NCHW tensor through sliding windows ("taps"):
//
//   NN (forward, backward data):  out[m][q] = sum_k A[m][k] * B[k][q]
//   NT (backward weight):         C[m][k]  = sum_q D[m][q] * B[k][q]
//
// q runs over the output pixels (image, qy, qx) of a grid. The rows k of B
// are taps: k = (c * tr + i) * tc + j reads channel c of the source shifted
// by (offy[i], offx[j]): B[k][(b, qy, qx)] = src[b][c * cstride + y * sw + x]
// with y = qy * ssy + offy[i] and x = qx * ssx + offx[j], and zero where
// (y, x) falls outside the source's sh x sw plane (padding). Rows that
// scatter (below) may instead be numbered channel-fastest,
// k = (i * tc + j) * channels + c. A (weights) is a plain row-major matrix;
// D (the output gradient) is read like B with a single tap per row. No
// column matrix is ever built: the per-ISA code (conv_pack.h) copies the
// pieces of B a tile needs into a small packed buffer right before its
// micro-kernel uses them.
//
// This header holds plain data only; the code that walks it is compiled per
// ISA family (see cpu_isa.h), and conv_cpp.cc builds the jobs and splits
// them over threads.
#ifndef SINGA_SRC_CORE_NN_CONV_ENGINE_H_
#define SINGA_SRC_CORE_NN_CONV_ENGINE_H_

#include <cstddef>
#include <cstdint>

#include "singa/core/cpu_isa.h"

#include "path_mode.h"

namespace singa {
namespace cpu {

// Rows read through taps from a dense [n][...] source.
struct TapRows {
  const float* src;
  int64_t img_stride;  // floats per image
  int64_t cstride;     // floats per channel
  int sh, sw;          // the plane every tap reads (rows, columns)
  int ssy, ssx;        // grid stride in the source
  int channels, tr, tc;
  const int* offy;  // tr entries
  const int* offx;  // tc entries
  bool channel_fastest = false;
  // The array is too large to stay in L2 (over kFetchAheadBytes): packing
  // fetches the next channel's rows ahead for every layout (see PackRows).
  bool fetch_ahead = false;
  int rows() const { return channels * tr * tc; }
};

// Arrays over this many bytes are taken to lie beyond L2, so the packings
// that read them channel by channel fetch the next channel ahead (PackRows,
// and the Winograd weight gradient's GatherRows).
constexpr int64_t kFetchAheadBytes = int64_t(2) << 20;

// The output pixel grid: n images of gh x gw pixels, flattened as
// q = (b * gh + qy) * gw + qx.
struct Grid {
  int n, gh, gw;
  int64_t pixels() const { return int64_t(n) * gh * gw; }
};

// out[m][q] = bias[m] + sum_k a[m * lda + k] * B[k][q], for m < M. Pixel
// (b, qy, qx), channel m is written at out + b * out_img + m * out_ch +
// obase + qy * osy + qx * osx.
//
// With `scatter` set, the result is instead added into `out` through taps:
// row m is tap m of *scatter, and element (m, (b, qy, qx)) is added where
// that tap reads for grid pixel (qy, qx) of image b (scatter->src is
// ignored; `out` is the base it reads from). That is col2im fused into the
// product. Different images never touch the same output, so threads split
// a scatter job by images only. Its output planes (scatter->channels planes
// of out_ch floats from out, per image) need not be set: RunNn clears an
// image's planes right before adding into them, while they are cached,
// rather than in a pass of its own over the whole output beforehand (the
// stride-2 data gradient of ResNet-18's 64 -> 128 layer took 0.90-0.97x
// the time, other layers 0.96-0.99x; Zen 5, alternating call by call).
struct NnJob {
  TapRows b;
  Grid grid;
  int M;
  const float* a;
  int64_t lda;
  const float* bias;  // may be null
  float* out;
  int64_t out_img, out_ch, obase, osy, osx;
  int kc;  // reduction block
  const TapRows* scatter = nullptr;
  // When > 0 (with osx == 2 and kc covering the whole reduction): output
  // rows are gap_w floats wide, and the float after each pixel written is
  // set to zero where it lies in the row, so a stride-2 product writes its
  // rows whole instead of every other float.
  int gap_w = 0;
  // With gap_w: when > 0, the output planes' rows; the row below each row
  // written (where there is one) is cleared over the same columns.
  int gap_h = 0;
  // When set (a job whose pixels fit the one-vector tile, see
  // NnPanelRows): A's rows rearranged in panels of NnPanelRows() rows, the
  // panel of rows [r, r + R) at a_panels + (r / R) * a_panel_stride holding
  // [k][R] with this job's k = 0 at offset 0. NnSlab then reads one stream
  // instead of R rows lda apart (which, with lda a multiple of 2 KiB, fall
  // into one or two sets of L1 and evict each other).
  const float* a_panels = nullptr;
  int64_t a_panel_stride = 0;
  bool dense() const { return osx == 1 && osy == grid.gw; }
};

// c[m * ldc + k] (+)= sum_q D[m][q] * B[k][q] over the grid's pixels q.
// D[m][q] = d[(q / dplane) * d_img + m * ldd + q % dplane]: either the output
// gradient itself (dplane = its plane, a multiple of 16) or a copy laid out
// channel by channel (dplane = ldd, a multiple of 16, zero past the last
// pixel). NtBlock never reads past a multiple of 16 within one dplane.
struct NtJob {
  TapRows b;
  Grid grid;
  int M;
  const float* d;
  int64_t ldd, d_img, dplane;
};

// Whether NtBlock sums its reduction in the broadcast form (conv_nt_isa.cc):
// SINGA_CONV_NT_BROADCAST=off|auto|force sets the initial mode.
PathMode NtBroadcastMode();
void SetNtBroadcastMode(PathMode mode);

// What conv_isa.cc and conv_nt_isa.cc provide in each ISA namespace.
SINGA_ISA_DECLARE(
    // Output columns per micro-tile of the NN kernel, and the rows per
    // micro-tile it uses for M output rows.
    int NnColsPerTile();
    int NnRowsPerTile(int M);
    // Rows and columns of the one-vector tile, which products of at most
    // that many pixels take, and whose rows NnJob::a_panels may hold; rows 0
    // where the family has no such tile.
    int NnPanelRows();
    int NnPanelCols();
    // Floats of scratch NnSlab needs for `cols` columns.
    size_t NnWorkFloats(const NnJob& job, int64_t cols);
    // Computes columns [q0, q1) and rows [m0, m1) of the job. `work` is
    // 64-byte aligned.
    void NnSlab(const NnJob& job, int64_t q0, int64_t q1, int m0, int m1,
                float* work);
    // Floats of scratch NtBlock needs for `cols` reduction columns and
    // `rows` rows of B.
    size_t NtWorkFloats(const NtJob& job, int64_t cols, int rows);
    // Rows of B per micro-tile (NtBlock's k ranges should be multiples).
    int NtRowsPerTile();
    // c[m][k] for k in [k0, k1): (accumulate ? c + : ) the sum over the
    // reduction columns [q0, q1).
    void NtBlock(const NtJob& job, int64_t q0, int64_t q1, int k0, int k1,
                 float* c, int64_t ldc, bool accumulate, float* work);
    // dst[c * rows + r] = src[r * cols + c] (the drivers' rearranged
    // weights), in 8 x 8 register blocks, over the threads when large.
    void TransposeFloats(const float* src, int64_t rows, int64_t cols,
                         float* dst);)

}  // namespace cpu
}  // namespace singa

#endif  // SINGA_SRC_CORE_NN_CONV_ENGINE_H_
