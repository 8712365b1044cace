// CPU kernels for convolution, pooling and batch normalisation.
//
// Conventions shared by every function here:
//   * float32 only, raw pointers, every tensor dense and contiguous.
//   * Images are NCHW; conv weights are [oc, c / groups, kh, kw].
//   * Output argument(s) come last (before the parameter struct when there
//     is one); outputs are overwritten, never accumulated into.
//   * Padding is given per side (top, left, bottom, right) because ONNX
//     allows asymmetric ("SAME_UPPER"-style) padding.
//   * Invalid parameters throw std::invalid_argument with the shapes in the
//     message.
// Work is spread with OpenMP; matrix products go through OpenBLAS and are
// never issued from inside an OpenMP parallel region. The conv functions
// call singa::UseOpenMPForBlas() (blas.h), which makes OpenBLAS run its
// threads on the OpenMP pool for the whole process: two pools spinning on
// the same cores otherwise slow every GEMM that follows an OpenMP loop.
// Conv keeps its im2col buffers in thread-local storage of the calling
// thread (at most about 8 MiB of columns plus the output matrix); its
// Winograd path (3x3, stride 1) keeps up to about 8 MiB of transformed
// weights in the calling thread, up to 32 MiB of them between calls in a
// process-wide cache (see ConvParams::w_stamp) and, in each OpenMP thread,
// tile buffers of about 10 MiB at 512 channels (more for wider layers).
#ifndef SINGA_CORE_NN_KERNELS_H_
#define SINGA_CORE_NN_KERNELS_H_

#include <cstdint>

namespace singa {
namespace cpu {

// Output length of a sliding window along one axis; 0 when the (dilated)
// window does not fit in the padded input even once.
int WindowOutputSize(int in, int k, int stride, int pad_begin, int pad_end,
                     int dilation, bool ceil_mode = false);

// ---------------------------------------------------------------------------
// im2col / col2im for a single image.
// col has shape [c * kh * kw, oh * ow]; row index is (ci * kh + ki) * kw + kj.
// Padded cells read as zero. Col2Im overwrites im (zeroing it first) and sums
// the contributions of overlapping windows.
void Im2Col(const float* im, int c, int h, int w, int kh, int kw, int pad_t,
            int pad_l, int pad_b, int pad_r, int sh, int sw, int dh, int dw,
            float* col);
void Col2Im(const float* col, int c, int h, int w, int kh, int kw, int pad_t,
            int pad_l, int pad_b, int pad_r, int sh, int sw, int dh, int dw,
            float* im);

// ---------------------------------------------------------------------------
// 2-D convolution (cross-correlation, as in ONNX Conv / PyTorch conv2d).
struct ConvParams {
  int n, c, h, w;   // input
  int oc, kh, kw;   // weight is [oc, c / groups, kh, kw]
  int sh, sw;       // strides
  int pad_t, pad_l, pad_b, pad_r;
  int dh, dw;       // dilations
  int groups;
  // Block::stamp() of the weights' storage, or 0 when unknown. With it the
  // Winograd path keeps the weights' transform for the next call that
  // finds the same stamp (winograd.h); it never changes the result.
  uint64_t w_stamp = 0;
  int oh() const;
  int ow() const;
  // Throws std::invalid_argument if any size is non-positive, a pad is
  // negative, groups does not divide c and oc, or the output would be empty.
  void Validate() const;
};

// y: [n, oc, oh, ow]. b may be null (no bias).
void Conv2dForward(const float* x, const float* w, const float* b, float* y,
                   const ConvParams& p);
// dx: [n, c, h, w] from dy: [n, oc, oh, ow].
void Conv2dBackwardData(const float* dy, const float* w, float* dx,
                        const ConvParams& p);
// dw: [oc, c / groups, kh, kw], summed over the batch.
void Conv2dBackwardWeight(const float* x, const float* dy, float* dw,
                          const ConvParams& p);
// db: [oc].
void Conv2dBackwardBias(const float* dy, float* db, const ConvParams& p);

// ---------------------------------------------------------------------------
// 2-D pooling. Output size follows ONNX / PyTorch: with ceil_mode the last
// window is dropped if it would start beyond the input plus top/left padding.
// 1-D pooling is expressed by the caller as h = 1, kh = 1.
struct PoolParams {
  int n, c, h, w;
  int kh, kw;
  int sh, sw;
  int pad_t, pad_l, pad_b, pad_r;
  int dh, dw;
  bool ceil_mode;
  bool count_include_pad;  // average pooling only
  int oh() const;
  int ow() const;
  void Validate() const;
};

// y: [n, c, oh, ow]. argmax (may be null) receives, per output cell, the flat
// index iy * w + ix of the winner inside its input plane; padding never wins.
// A window lying entirely in padding yields -inf and argmax -1. NaN inputs
// propagate, as in PyTorch.
void MaxPool2dForward(const float* x, float* y, int32_t* argmax,
                      const PoolParams& p);
// dx is zeroed, then every dy is added at its argmax position. Positions
// outside the input plane are skipped: negative ones (a window with no
// input) silently, and the count of those at or past the plane's end is
// returned, for the caller to report as an error.
size_t MaxPool2dBackward(const float* dy, const int32_t* argmax, float* dx,
                         const PoolParams& p);
// Divisor: cells of the window inside the input (count_include_pad=false) or
// inside input+padding (true); cells past the padded edge, which ceil_mode
// can create, are never counted.
void AvgPool2dForward(const float* x, float* y, const PoolParams& p);
void AvgPool2dBackward(const float* dy, float* dx, const PoolParams& p);

// ---------------------------------------------------------------------------
// Batch normalisation over [n, c, hw] with per-channel statistics.
// mean_out / var_out receive the batch mean and the biased batch variance
// (divide by n * hw); updating running statistics is the caller's job.
void BatchNormForwardTraining(const float* x, const float* scale,
                              const float* bias, float* y, float* mean_out,
                              float* var_out, int n, int c, int hw, float eps);
void BatchNormForwardInference(const float* x, const float* scale,
                               const float* bias, const float* running_mean,
                               const float* running_var, float* y, int n,
                               int c, int hw, float eps);
// Training-mode gradient: mean and var are the batch statistics returned by
// BatchNormForwardTraining, and dx includes the terms flowing through them.
void BatchNormBackward(const float* x, const float* dy, const float* scale,
                       const float* mean, const float* var, float* dx,
                       float* dscale, float* dbias, int n, int c, int hw,
                       float eps);

}  // namespace cpu
}  // namespace singa

#endif  // SINGA_CORE_NN_KERNELS_H_
