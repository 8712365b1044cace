// The data gradient of a convolution (see conv_cpp.cc for the passes'
// forms): Winograd or the few-pixel forms where they apply, else the
// tap-scatter form for inputs with few channels (conv_taps_dx.h), a plain
// product for 1x1 stride-2 kernels, col2im fused into the product when dy
// has at least as many channels as dx (but see GatherStride1), and
// otherwise one stride-1 product per phase of the stride (the gather form).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "singa/core/nn_kernels.h"

#include "conv_driver.h"
#include "conv_engine.h"
#include "conv_few.h"
#include "conv_taps_dx.h"
#include "conv_threads.h"
#include "winograd.h"

namespace singa {
namespace cpu {

namespace {

size_t TapsDxWork(const TapsDxJob& j) {
  SINGA_ISA_DISPATCH(TapsDxWorkFloats(j));
}
void RunTapsDx(const TapsDxJob& j, int b, float* work) {
  SINGA_ISA_DISPATCH(TapsDxImage(j, b, work));
}

// Input channels up to which the tap-scatter form (conv_taps_dx.h)
// computes dx: above them the engine's scatter form below fills its tile
// rows (c * kh * kw) with whole channels.
constexpr int kTapsDxMaxC = 4;

bool UseTapsDx(const ConvParams& p) {
  return p.groups == 1 && p.c <= kTapsDxMaxC && p.sh == 1 && p.sw == 1 &&
         p.dh == 1 && p.dw == 1 && p.kh <= kTapsDxMaxK;
}

// dx by the tap-scatter form (conv_taps_dx.h), for UseTapsDx(p): w
// rearranged as its tiles read it, the threads taking whole images.
void BackwardDataTaps(const float* dy, const float* w, float* dx,
                      const ConvParams& p) {
  const int kk = p.kh * p.kw;
  float* wt = ThreadWork(size_t(p.c) * p.oc * kk, 1);
  for (int c = 0; c < p.c; ++c)
    for (int j = 0; j < p.kw; ++j)
      for (int m = 0; m < p.oc; ++m)
        for (int i = 0; i < p.kh; ++i)
          wt[((int64_t(c) * p.kw + j) * p.oc + m) * p.kh + i] =
              w[((int64_t(m) * p.c + c) * p.kh + i) * p.kw + j];
  const TapsDxJob job{dy, wt, dx, p.n, p.c, p.h, p.w, p.oc, p.oh(), p.ow(),
                      p.kh, p.kw, p.pad_t, p.pad_l};
  const size_t work = TapsDxWork(job);
  const int threads = std::min<int>(
      p.n, ThreadsFor(int64_t(p.n) * p.c * p.h * p.w * p.oc * kk));
#pragma omp parallel num_threads(threads) if (threads > 1)
  {
    float* buf = ThreadWork(work);
#pragma omp for schedule(static)
    for (int b = 0; b < p.n; ++b) RunTapsDx(job, b, buf);
  }
}

// 1x1 kernels at stride 2 without padding (a ResNet shortcut): dx is
// w^T dy at the pixels of even row and column and zero elsewhere. One plain
// product writes each even row whole, the zeros between its pixels included
// (NnJob::gap_w), and clears the odd row below it as it goes (gap_h): dx is
// written once, rather than cleared and then added into at every other
// float. Clearing the odd rows in the product rather than in a pass of its
// own took 0.96-0.98x the time at one thread and 0.92-0.94x at two on
// ResNet-18's shortcut (AVX-512, Zen 5; with AVX2 kernels 0.99x and 0.94x;
// alternating call by call).
void BackwardDataPointwiseS2(const float* dy, const float* w, float* dx,
                             const ConvParams& p) {
  const int oh = p.oh(), ow = p.ow();
  const int64_t P = int64_t(oh) * ow, plane = int64_t(p.h) * p.w;
  const int cg = p.c / p.groups, mg = p.oc / p.groups;
  float* wt = ThreadWork(size_t(p.oc) * cg, 1);
  for (int g = 0; g < p.groups; ++g)
    Transpose(w + int64_t(g) * mg * cg, mg, cg, wt + int64_t(g) * cg * mg);
  const int zero = 0;
  std::vector<NnJob> jobs;
  for (int g = 0; g < p.groups; ++g) {
    NnJob j;
    j.b = TapRows{dy + int64_t(g) * mg * P, p.oc * P, P, oh, ow, 1, 1, mg, 1,
                  1, &zero, &zero};
    j.grid = Grid{p.n, oh, ow};
    j.M = cg;
    j.a = wt + int64_t(g) * cg * mg;
    j.lda = mg;
    j.bias = nullptr;
    j.out = dx + int64_t(g) * cg * plane;
    j.out_img = p.c * plane;
    j.out_ch = plane;
    j.obase = 0;
    j.osy = 2 * int64_t(p.w);
    j.osx = 2;
    j.kc = mg;
    j.gap_w = p.w;
    j.gap_h = p.h;
    jobs.push_back(j);
  }
  RunNn(jobs);
}

// dx as col2im fused into the product: rows (cc, ki, kj) of w^T times dy,
// each added into dx where the forward window read it. Chosen when dy has at
// least as many channels as dx: packing dy is then a plain copy shared by
// cg * kh * kw rows, and the scatter costs one add per result, against mg
// multiply-adds. The gather form below would instead pack mg * kh * kw
// shifted copies of dy for only cg rows.
void BackwardDataScatter(const float* dy, const float* w, float* dx,
                         const ConvParams& p) {
  if (UseTapsDx(p)) return BackwardDataTaps(dy, w, dx, p);
  if (p.kh == 1 && p.kw == 1 && p.sh == 2 && p.sw == 2 && p.pad_t == 0 &&
      p.pad_l == 0 && 2 * (p.oh() - 1) < p.h && 2 * (p.ow() - 1) < p.w &&
      p.oc / p.groups <= kMaxKc)
    return BackwardDataPointwiseS2(dy, w, dx, p);
  const int oh = p.oh(), ow = p.ow();
  const int64_t P = int64_t(oh) * ow, plane = int64_t(p.h) * p.w;
  const int cg = p.c / p.groups, mg = p.oc / p.groups;
  const int kk = p.kh * p.kw, K = cg * kk;  // rows of w^T per group
  // Threads split the images; when there are too few, the input channels
  // too, as separate jobs (a job's rows are its channels' taps).
  const int threads = ThreadsFor(int64_t(p.n) * P * p.oc * K);
  const int chunks = int(std::min<int64_t>(
      cg, std::max<int64_t>(1, CeilDiv(2 * threads, p.n))));
  const int per = int(CeilDiv(cg, chunks));
  // Rows of w^T are (cc, ki, kj), or (ki, kj, cc) when the reduction over mg
  // is short: then the stalls ScatterTile avoids by numbering rows channel
  // fastest cost more than the wider spread of its writes (measured on
  // LeNet's second layer, mg = 50, against ResNet layers, mg >= 64).
  const bool channel_fastest = mg < 64;
  float* wt = ThreadWork(size_t(p.groups) * K * mg, 1);
  for (int g = 0; g < p.groups; ++g) {
    if (!channel_fastest) {
      Transpose(w + int64_t(g) * mg * K, mg, K, wt + int64_t(g) * K * mg);
      continue;
    }
    for (int c0 = 0; c0 < cg; c0 += per) {
      const int nc = std::min(per, cg - c0);
      float* rows = wt + int64_t(g) * K * mg + int64_t(c0) * kk * mg;
      for (int t = 0; t < kk; ++t)
        for (int cc = 0; cc < nc; ++cc) {
          float* row = rows + (int64_t(t) * nc + cc) * mg;
          const float* src = w + (int64_t(g) * mg * cg + c0 + cc) * kk + t;
          for (int m = 0; m < mg; ++m) row[m] = src[int64_t(m) * cg * kk];
        }
    }
  }
  const ForwardTaps taps = MakeForwardTaps(p);
  const int zero = 0;
  std::vector<TapRows> into;
  into.reserve(size_t(p.groups) * chunks);
  std::vector<NnJob> jobs;
  for (int g = 0; g < p.groups; ++g)
    for (int c0 = 0; c0 < cg; c0 += per) {
      const int nc = std::min(per, cg - c0);
      TapRows t = InputRows(dx, p, taps, g);  // src unused: out is dx
      t.channels = nc;
      t.channel_fastest = channel_fastest;
      into.push_back(t);
      NnJob j;
      j.b = TapRows{dy + int64_t(g) * mg * P, p.oc * P, P, oh, ow, 1, 1, mg, 1,
                    1, &zero, &zero};
      j.grid = Grid{p.n, oh, ow};
      j.M = nc * kk;
      j.a = wt + int64_t(g) * K * mg + int64_t(c0) * kk * mg;
      j.lda = mg;
      j.bias = nullptr;
      j.out = dx + (int64_t(g) * cg + c0) * plane;
      j.out_img = p.c * plane;
      j.out_ch = plane;
      j.obase = 0;
      j.osy = p.w;
      j.osx = 1;
      j.kc = ChooseKc(mg);
      j.scatter = &into.back();
      jobs.push_back(j);
    }
  RunNn(jobs);
}

// Whether a data gradient with at least as many output as input channels
// (per group) still takes the gather form (the phases below; at stride 1 a
// single product, a forward pass of dy with the weights turned around)
// rather than the scatter form: at stride 1 when dx is the size of dy, so
// the gather form runs no more multiply-adds. Measured against the scatter
// form (Zen 5, processes alternating):
// - 1x1 kernels: 64 -> 64 channels on 16x16 took 0.75-0.76x the time with
//   AVX-512 and 0.85-0.86x with AVX2, 128 -> 512 on 8x8 0.86-0.89x and
//   0.97-0.98x, 64 -> 256 on 16x16 0.90-0.92x (AVX-512);
// - 5x5 kernels with as many output as input channels, AVX-512 only: 64 on
//   16x16 0.83-0.87x, 32 on 32x32 0.85-0.91x, 96 on 8x8 0.80-0.89x (batch
//   4 to 64; even at batch 1). With AVX2 the same layers took 0.96-0.99x
//   and 1.12-1.20x; with twice the output channels (64 -> 128) both families
//   lost (1.05-1.09x), and 3x3 kernels lost too (1.03-1.11x, Winograd off),
//   which Winograd mostly takes anyway.
bool GatherStride1(const ConvParams& p) {
  if (p.sh != 1 || p.sw != 1 || p.dh != 1 || p.dw != 1 || p.oh() != p.h ||
      p.ow() != p.w || UseTapsDx(p))
    return false;
  if (p.kh == 1 && p.kw == 1) return true;
  return p.oc == p.c && p.kh >= 5 && p.kw >= 5 && ActiveIsa() == Isa::kAvx512;
}

}  // namespace

void Conv2dBackwardData(const float* dy, const float* w, float* dx,
                        const ConvParams& p) {
  p.Validate();
  if (WinogradBackwardData(dy, w, dx, p)) return;
  const int cg = p.c / p.groups, mg = p.oc / p.groups;
  if (mg >= cg && !UseTapsDx(p) && FewPixelsBackwardData(dy, w, dx, p)) return;
  if (mg >= cg && !GatherStride1(p)) return BackwardDataScatter(dy, w, dx, p);
  const int oh = p.oh(), ow = p.ow();
  const int64_t P = int64_t(oh) * ow, plane = int64_t(p.h) * p.w;
  const int kk = p.kh * p.kw;

  // Per phase: its taps, their dy offsets, and the weights rearranged as
  // A[cc][m * taps + t] so the phase is a plain NN product.
  struct Phase {
    int ry, rx, gh, gw;
    std::vector<int> ki, kj;      // the kernel rows and columns that reach it
    std::vector<int> offy, offx;  // their dy offsets
    float* a;                     // [groups][cg][mg * taps]
  };
  std::vector<Phase> phases;
  std::vector<Phase> empty;  // phases no tap reaches: their dx is zero
  for (int ry = 0; ry < std::min(p.sh, p.h); ++ry)
    for (int rx = 0; rx < std::min(p.sw, p.w); ++rx) {
      Phase ph;
      ph.ry = ry;
      ph.rx = rx;
      ph.gh = int(CeilDiv(p.h - ry, p.sh));
      ph.gw = int(CeilDiv(p.w - rx, p.sw));
      // dx row iy = ry + sh * qy takes dy row (iy + pad_t - ki * dh) / sh,
      // an integer exactly when sh divides ry + pad_t - ki * dh.
      for (int ki = 0; ki < p.kh; ++ki)
        if ((ry + p.pad_t - ki * p.dh) % p.sh == 0) {
          ph.ki.push_back(ki);
          ph.offy.push_back((ry + p.pad_t - ki * p.dh) / p.sh);
        }
      for (int kj = 0; kj < p.kw; ++kj)
        if ((rx + p.pad_l - kj * p.dw) % p.sw == 0) {
          ph.kj.push_back(kj);
          ph.offx.push_back((rx + p.pad_l - kj * p.dw) / p.sw);
        }
      (ph.ki.empty() || ph.kj.empty() ? empty : phases).push_back(std::move(ph));
    }

  // The phases partition the taps, so their weights fill one w-sized buffer.
  float* a = ThreadWork(size_t(p.oc) * cg * kk, 1);
  std::vector<NnJob> jobs;
  for (Phase& ph : phases) {
    const int tr = int(ph.ki.size()), tc = int(ph.kj.size());
    const int K = mg * tr * tc;
    ph.a = a;
    a += int64_t(p.groups) * cg * K;
    for (int g = 0; g < p.groups; ++g)
      for (int cc = 0; cc < cg; ++cc) {
        float* row = ph.a + (int64_t(g) * cg + cc) * K;
        for (int m = 0; m < mg; ++m) {
          const float* wm = w + ((int64_t(g) * mg + m) * cg + cc) * kk;
          for (int i = 0; i < tr; ++i)
            for (int jj = 0; jj < tc; ++jj)
              *row++ = wm[ph.ki[i] * p.kw + ph.kj[jj]];
        }
      }
    for (int g = 0; g < p.groups; ++g) {
      NnJob j;
      j.b = TapRows{dy + int64_t(g) * mg * P, p.oc * P, P, oh, ow, 1, 1, mg,
                    tr, tc, ph.offy.data(), ph.offx.data()};
      j.b.fetch_ahead = int64_t(sizeof(float)) * p.n * p.oc * P > kFetchAheadBytes;
      j.grid = Grid{p.n, ph.gh, ph.gw};
      j.M = cg;
      j.a = ph.a + int64_t(g) * cg * K;
      j.lda = K;
      j.bias = nullptr;
      j.out = dx + int64_t(g) * cg * plane;
      j.out_img = p.c * plane;
      j.out_ch = plane;
      j.obase = int64_t(ph.ry) * p.w + ph.rx;
      j.osy = int64_t(p.sh) * p.w;
      j.osx = p.sw;
      j.kc = ChooseKc(K);
      jobs.push_back(j);
    }
  }
  RunNn(jobs);
  for (const Phase& ph : empty) {
    const int64_t planes = int64_t(p.n) * p.c;
#pragma omp parallel for schedule(static) if (planes * plane > kParallelMacs)
    for (int64_t q = 0; q < planes; ++q)
      for (int iy = ph.ry; iy < p.h; iy += p.sh)
        for (int ix = ph.rx; ix < p.w; ix += p.sw)
          dx[q * plane + int64_t(iy) * p.w + ix] = 0.f;
  }
}

}  // namespace cpu
}  // namespace singa
