// Convolution entry points: each pass becomes implicit-GEMM jobs
// (conv_engine.h) that are split over OpenMP threads and run by the copy of
// conv_isa.cc and conv_nt_isa.cc compiled for the CPU's ISA family.
//
//   forward:          y[m][q]  = sum_{c,t} w[m][c,t] * x[c][q shifted by t]
//   backward data:    dx[c][p] = sum_{m,t} w[m][c,t] * dy[m][p shifted by -t]
//                     With stride s the dx pixels split into s*s phases by
//                     (iy mod s, ix mod s); each phase is a stride-1 product
//                     over the taps that reach it, so no zero is multiplied.
//   backward weight:  dw[m][c,t] = sum_q dy[m][q] * x[c][q shifted by t]
//
// The data gradient is in conv_dx_cpp.cc; the drivers both files use are
// declared in conv_driver.h.
//
// 3x3 stride-1 forward and data-gradient passes go to Winograd F(4x4, 3x3)
// (winograd.h) where that was measured to be faster, and stride-1 forward
// and weight-gradient passes with a short reduction to the flat-shift form
// (conv_shift.h).
//
// Threads share nothing they write: NN jobs are cut into slabs of output
// pixels (and, for few pixels, ranges of output channels, or of input
// channels whose partial outputs are then added); the weight
// gradient is cut into ranges of its columns, or, when it is small and the
// reduction long, into ranges of the reduction whose partial sums are added
// in thread order, so results do not depend on scheduling.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "singa/core/nn_kernels.h"

#include "conv_driver.h"
#include "conv_engine.h"
#include "conv_few.h"
#include "conv_shift.h"
#include "conv_threads.h"
#include "weight_cache.h"
#include "winograd.h"
#include "winograd_weight.h"

namespace singa {
namespace cpu {

namespace {

PathMode& CurrentNtBroadcastMode() {
  static PathMode mode = PathModeFromEnv("SINGA_CONV_NT_BROADCAST");
  return mode;
}

}  // namespace

PathMode NtBroadcastMode() { return CurrentNtBroadcastMode(); }
void SetNtBroadcastMode(PathMode mode) { CurrentNtBroadcastMode() = mode; }

namespace {

// Packed B panels of one NN slab stay within this many floats (L2 sized).
constexpr int64_t kSlabFloats = int64_t(1) << 16;
// Reduction blocks of the NN product: one block up to kMaxKc taps.
constexpr int kKcBlock = 512;

// ISA dispatch for the engine (SINGA_ISA_DISPATCH returns from its caller).
int NnCols() { SINGA_ISA_DISPATCH(NnColsPerTile()); }
int NnRows(int M) { SINGA_ISA_DISPATCH(NnRowsPerTile(M)); }
int PanelRows() { SINGA_ISA_DISPATCH(NnPanelRows()); }
int PanelCols() { SINGA_ISA_DISPATCH(NnPanelCols()); }
size_t NnWork(const NnJob& j, int64_t cols) {
  SINGA_ISA_DISPATCH(NnWorkFloats(j, cols));
}
void RunNnSlab(const NnJob& j, int64_t q0, int64_t q1, int m0, int m1,
               float* work) {
  SINGA_ISA_DISPATCH(NnSlab(j, q0, q1, m0, m1, work));
}
int NtRows() { SINGA_ISA_DISPATCH(NtRowsPerTile()); }
size_t NtWork(const NtJob& j, int64_t cols, int rows) {
  SINGA_ISA_DISPATCH(NtWorkFloats(j, cols, rows));
}
void RunNtBlock(const NtJob& j, int64_t q0, int64_t q1, int k0, int k1,
                float* c, int64_t ldc, bool accumulate, float* work) {
  SINGA_ISA_DISPATCH(NtBlock(j, q0, q1, k0, k1, c, ldc, accumulate, work));
}

// The reduction block of a product whose pixels fit one panel of B: that
// panel is read from L2 whatever its length, so the block is made as long
// as kPanelFloats allows and each row of A is read in one long run. At
// batch 1 the weights come from memory, and the rows of short blocks (2 KiB
// each) are more streams than the prefetchers follow: on an AVX2 EPYC a
// 512-channel 3x3 layer on a 4x4 plane (4608 rows) took 0.95x the time at
// one thread and 0.92x at two in whole blocks, inside ResNet-18's forward.
constexpr int64_t kPanelFloats = int64_t(1) << 17;
int PanelKc(int K) {
  const int most = int(kPanelFloats / NnCols());
  return K <= most ? K : int(CeilDiv(K, CeilDiv(K, most)));
}

// Input-channel rows per thread from which a one-slab product is split by
// its reduction (RunNnByReduction) rather than by its output rows.
constexpr int kSplitRowsPerThread = 1024;

// out += the partial products of the reduction's other shares, laid out
// share by share as [m][pixel] (see RunNnByReduction), for a dense job's
// rows [m0, m1).
void AddShares(const NnJob& j, const float* shares, int parts, int m0, int m1) {
  const int64_t N = j.grid.pixels(), P = int64_t(j.grid.gh) * j.grid.gw;
  for (int m = m0; m < m1; ++m)
    for (int b = 0; b < j.grid.n; ++b) {
      float* o = j.out + b * j.out_img + m * j.out_ch + j.obase;
      for (int s = 0; s < parts; ++s) {
        const float* t = shares + (int64_t(s) * j.M + m) * N + b * P;
        for (int64_t q = 0; q < P; ++q) o[q] += t[q];
      }
    }
}

// A product whose pixels fill one slab, split over the threads by output
// rows, would have every thread pack all of B for its rows. Each thread
// instead takes a share of the input channels, packs only those rows of B
// and multiplies them with all of A's rows; the first share writes the
// output (with the bias), the others their own buffers, which are then
// added into it. With 2 threads, a 512-channel 3x3 layer on a 4x4 plane at
// batch 1 packs half as much per thread. The shares depend on the thread
// count, so the sums' rounding does too.
bool RunNnByReduction(const NnJob& j, int threads) {
  const TapRows& t = j.b;
  if (threads < 2 || j.scatter || j.gap_w > 0 || !j.dense() ||
      t.channel_fastest || t.channels < threads ||
      int64_t(t.rows()) < int64_t(kSplitRowsPerThread) * threads)
    return false;
  const int taps = t.tr * t.tc;
  const int64_t N = j.grid.pixels();
  std::vector<NnJob> parts(size_t(threads), j);
  size_t work = 0;
  for (int s = 0; s < threads; ++s) {
    NnJob& p = parts[size_t(s)];
    const int c0 = int(int64_t(t.channels) * s / threads);
    const int c1 = int(int64_t(t.channels) * (s + 1) / threads);
    p.b.src = t.src + c0 * t.cstride;
    p.b.channels = c1 - c0;
    p.a = j.a + int64_t(c0) * taps;
    if (j.a_panels) p.a_panels = j.a_panels + int64_t(c0) * taps * PanelRows();
    p.kc = PanelKc(p.b.rows());
    work = std::max(work, NnWork(p, N));
  }
  thread_local std::vector<float> shares;
  shares.resize(size_t(threads - 1) * j.M * N);
  for (int s = 1; s < threads; ++s) {
    NnJob& p = parts[size_t(s)];
    p.bias = nullptr;
    p.out = shares.data() + int64_t(s - 1) * j.M * N;
    p.out_img = int64_t(j.grid.gh) * j.grid.gw;
    p.out_ch = N;
    p.obase = 0;
    p.osy = j.grid.gw;
    p.osx = 1;
  }
  const float* sums = shares.data();
  const int mr = NnRows(j.M);
  const int tiles = int(CeilDiv(j.M, mr));
#pragma omp parallel num_threads(threads)
  {
    float* buf = ThreadWork(work);
#pragma omp for schedule(static)
    for (int s = 0; s < threads; ++s)
      RunNnSlab(parts[size_t(s)], 0, N, 0, j.M, buf);
#pragma omp for schedule(static)
    for (int i = 0; i < tiles; ++i)
      AddShares(j, sums, threads - 1, i * mr, std::min(j.M, (i + 1) * mr));
  }
  return true;
}

}  // namespace

// dst[c * rows + r] = src[r * cols + c] (per ISA: 8 x 8 register blocks;
// a 512 x 4608 weight took 0.3 instead of 1.3 ms at one thread).
void Transpose(const float* src, int64_t rows, int64_t cols, float* dst) {
  SINGA_ISA_DISPATCH(TransposeFloats(src, rows, cols, dst));
}

int ChooseKc(int K) {
  if (K <= kMaxKc) return K;
  return int(CeilDiv(K, CeilDiv(K, kKcBlock)));
}

// Runs NN jobs over the threads. A job is cut into slabs of output pixels
// sized so their packed B stays in L2; when that leaves fewer slabs than
// threads, the output rows are split as well. A scatter job adds into its
// output through overlapping windows, so its items are whole images (run
// slab by slab) and whole input channels. The reduction block of a job
// whose pixels fit one panel is lengthened (PanelKc), in place.
void RunNn(std::vector<NnJob>& jobs) {
  struct Item {
    int job;
    int64_t q0, q1, slab;
    int m0, m1;
  };
  const int cols = NnCols();
  for (NnJob& j : jobs)
    if (j.grid.pixels() <= cols && !j.scatter && j.gap_w == 0)
      j.kc = PanelKc(j.b.rows());
  int64_t macs = 0;
  for (const NnJob& j : jobs) macs += j.grid.pixels() * j.M * j.b.rows();
  const int threads = ThreadsFor(macs);
  std::vector<Item> items;
  size_t work = 0;
  for (size_t ji = 0; ji < jobs.size(); ++ji) {
    const NnJob& j = jobs[ji];
    const int64_t N = j.grid.pixels();
    int64_t slab = std::max<int64_t>(1, kSlabFloats / j.kc / cols) * cols;
    const int mr = j.a_panels ? PanelRows() : NnRows(j.M);
    if (j.scatter) {
      // Whole images per item, as many as a slab holds, so each pass over
      // the weights serves several images.
      const int64_t plane = int64_t(j.grid.gh) * j.grid.gw;
      const int64_t per_item = std::clamp<int64_t>(
          slab / plane, 1, std::max<int64_t>(1, CeilDiv(j.grid.n, 2 * threads)));
      for (int64_t b = 0; b < j.grid.n; b += per_item)
        items.push_back(Item{int(ji), b * plane,
                             std::min<int64_t>(j.grid.n, b + per_item) * plane,
                             slab, 0, j.M});
    } else {
      // Enough slabs to keep every thread busy when there are pixels enough.
      slab = std::min(slab, std::max<int64_t>(cols, CeilDiv(N, 4 * threads) /
                                                        cols * cols));
      const int64_t slabs = CeilDiv(N, slab);
      const int64_t tiles = CeilDiv(j.M, mr);
      // Every chunk packs its slab's B again (0.13 ms of the 1.03 of a
      // 512-channel 3x3 layer on a 4x4 plane at batch 1, measured on an
      // AVX2 EPYC): one thread never splits; a single slab with a long
      // reduction is split by it instead, else once per thread; otherwise
      // two items per thread keep the threads evenly loaded.
      if (slabs == 1 && jobs.size() == 1 && RunNnByReduction(j, threads))
        return;
      const int want = threads == 1 ? 1 : slabs == 1 ? threads : 2 * threads;
      const int64_t chunks = std::min<int64_t>(
          tiles, std::max<int64_t>(1, CeilDiv(want, slabs)));
      const int64_t per = CeilDiv(tiles, chunks) * mr;
      for (int64_t q = 0; q < N; q += slab)
        for (int64_t m0 = 0; m0 < j.M; m0 += per)
          items.push_back(Item{int(ji), q, std::min(N, q + slab), slab, int(m0),
                               int(std::min<int64_t>(j.M, m0 + per))});
    }
    work = std::max(work, NnWork(j, slab));
  }
  const int64_t count = int64_t(items.size());
#pragma omp parallel num_threads(threads) if (threads > 1)
  {
    float* buf = ThreadWork(work);
#pragma omp for schedule(dynamic, 1)
    for (int64_t i = 0; i < count; ++i) {
      const Item& it = items[size_t(i)];
      const NnJob& j = jobs[size_t(it.job)];
      if (j.scatter) {  // its planes start unset (conv_engine.h)
        const int64_t plane = int64_t(j.grid.gh) * j.grid.gw;
        for (int64_t b = it.q0 / plane; b < it.q1 / plane; ++b)
          std::memset(j.out + b * j.out_img, 0,
                      sizeof(float) * size_t(j.scatter->channels) * size_t(j.out_ch));
      }
      for (int64_t q = it.q0; q < it.q1; q += it.slab)
        RunNnSlab(j, q, std::min(it.q1, q + it.slab), it.m0, it.m1, buf);
    }
  }
}

ForwardTaps MakeForwardTaps(const ConvParams& p) {
  ForwardTaps t;
  for (int ki = 0; ki < p.kh; ++ki) t.offy.push_back(ki * p.dh - p.pad_t);
  for (int kj = 0; kj < p.kw; ++kj) t.offx.push_back(kj * p.dw - p.pad_l);
  return t;
}

TapRows InputRows(const float* x, const ConvParams& p, const ForwardTaps& t,
                  int g) {
  const int64_t plane = int64_t(p.h) * p.w;
  const int cg = p.c / p.groups;
  TapRows rows{x + g * cg * plane, p.c * plane, plane, p.h, p.w, p.sh,
               p.sw, cg, p.kh, p.kw, t.offy.data(), t.offx.data()};
  rows.fetch_ahead = int64_t(sizeof(float)) * p.n * p.c * plane > kFetchAheadBytes;
  return rows;
}

namespace {

std::string Describe(const ConvParams& p) {
  std::ostringstream os;
  os << "Conv2d: input [" << p.n << ", " << p.c << ", " << p.h << ", "
     << p.w << "], weight [" << p.oc << ", "
     << (p.groups > 0 ? p.c / p.groups : 0) << ", " << p.kh << ", " << p.kw
     << "], groups " << p.groups << ", stride " << p.sh << "x" << p.sw
     << ", dilation " << p.dh << "x" << p.dw << ", pads (t=" << p.pad_t
     << ", l=" << p.pad_l << ", b=" << p.pad_b << ", r=" << p.pad_r << ")";
  return os.str();
}

}  // namespace

int ConvParams::oh() const {
  return WindowOutputSize(h, kh, sh, pad_t, pad_b, dh);
}

int ConvParams::ow() const {
  return WindowOutputSize(w, kw, sw, pad_l, pad_r, dw);
}

void ConvParams::Validate() const {
  if (n <= 0 || c <= 0 || h <= 0 || w <= 0 || oc <= 0 || kh <= 0 ||
      kw <= 0 || sh <= 0 || sw <= 0 || dh <= 0 || dw <= 0 || groups <= 0)
    throw std::invalid_argument(Describe(*this) +
                                ": all sizes must be positive");
  if (pad_t < 0 || pad_l < 0 || pad_b < 0 || pad_r < 0)
    throw std::invalid_argument(Describe(*this) +
                                ": pads must be non-negative");
  if (c % groups != 0 || oc % groups != 0)
    throw std::invalid_argument(Describe(*this) + ": groups " +
                                std::to_string(groups) +
                                " must divide both input channels " +
                                std::to_string(c) + " and output channels " +
                                std::to_string(oc));
  if (oh() <= 0 || ow() <= 0)
    throw std::invalid_argument(Describe(*this) +
                                ": kernel does not fit, output is empty");
}


namespace {

// w's rows in the panels of NnJob::a_panels, kept in the weight cache, for a
// forward product whose pixels fit the one-vector tile; null when there is
// no such tile, the weights have no stamp, or they were not used twice
// unchanged (Fill::kSecondCall). At batch 1 the tile reads every weight
// once: ResNet-18's 512-channel 3x3 layer on a 4x4 plane took 0.77x the
// time at one thread and 0.76x at two from panels, its 256->512 stride-2
// layer 0.83x / 0.74x (AVX-512 Zen 5, alternating call by call), the
// batch-1 forward 0.80x / 0.90x (two builds alternating).
std::shared_ptr<const float> WeightPanels(const float* w, const ConvParams& p, int K) {
  const int R = PanelRows();
  if (R == 0 || p.groups != 1 || p.w_stamp == 0 ||
      int64_t(p.n) * p.oh() * p.ow() > PanelCols())
    return nullptr;
  const int blocks = int(CeilDiv(p.oc, R));
  auto fill = [&](float* out) {
    for (int bl = 0; bl < blocks; ++bl) {
      const int r0 = bl * R, rows = std::min(R, p.oc - r0);
      float* panel = out + int64_t(bl) * K * R;
      if (rows == R) {
        Transpose(w + int64_t(r0) * K, R, K, panel);
        continue;
      }
      for (int k = 0; k < K; ++k)
        for (int i = 0; i < R; ++i)
          panel[int64_t(k) * R + i] = i < rows ? w[int64_t(r0 + i) * K + k] : 0.f;
    }
  };
  return CachedWeights(WeightKey{p.w_stamp, w, p.oc, K, false, kPanelForm + R,
                                 int(ActiveIsa())},
                       size_t(blocks) * K * R, fill, Fill::kSecondCall);
}

}  // namespace

void Conv2dForward(const float* x, const float* w, const float* b, float* y,
                   const ConvParams& p) {
  p.Validate();
  if (WinogradForward(x, w, b, y, p)) return;
  if (ShiftForward(x, w, b, y, p)) return;
  const int oh = p.oh(), ow = p.ow();
  const int64_t P = int64_t(oh) * ow;
  const int mg = p.oc / p.groups;
  const ForwardTaps taps = MakeForwardTaps(p);
  const int K = p.c / p.groups * p.kh * p.kw;
  std::vector<NnJob> jobs;
  for (int g = 0; g < p.groups; ++g) {
    NnJob j;
    j.b = InputRows(x, p, taps, g);
    j.grid = Grid{p.n, oh, ow};
    j.M = mg;
    j.a = w + int64_t(g) * mg * K;
    j.lda = K;
    j.bias = b ? b + g * mg : nullptr;
    j.out = y + int64_t(g) * mg * P;
    j.out_img = p.oc * P;
    j.out_ch = P;
    j.obase = 0;
    j.osy = ow;
    j.osx = 1;
    j.kc = ChooseKc(K);
    jobs.push_back(j);
  }
  const std::shared_ptr<const float> panels = WeightPanels(w, p, K);
  if (panels) {
    jobs[0].a_panels = panels.get();
    jobs[0].a_panel_stride = int64_t(K) * PanelRows();
  }
  RunNn(jobs);
}

void Conv2dBackwardWeight(const float* x, const float* dy, float* dw,
                          const ConvParams& p) {
  p.Validate();
  if (WinogradWeightEligible(p) && RunWinogradWeight(x, dy, dw, p)) return;
  if (ShiftBackwardWeight(x, dy, dw, p)) return;
  if (FewPixelsBackwardWeight(x, dy, dw, p)) return;
  const int oh = p.oh(), ow = p.ow();
  const int64_t P = int64_t(oh) * ow;
  const int mg = p.oc / p.groups;
  const ForwardTaps taps = MakeForwardTaps(p);
  const int K = p.c / p.groups * p.kh * p.kw;
  const int64_t R = int64_t(p.n) * P;
  // The kernels read dy's rows in place when its planes are whole vectors
  // and long enough to sweep; otherwise from a copy laid out channel by
  // channel ([oc][n * P], rows padded with zeros to a multiple of 16).
  std::vector<NtJob> jobs;
  const bool in_place = P % 16 == 0 && P >= 256 && R > 1024;
  if (in_place) {
    for (int g = 0; g < p.groups; ++g)
      jobs.push_back(NtJob{InputRows(x, p, taps, g), Grid{p.n, oh, ow}, mg,
                           dy + int64_t(g) * mg * P, P, p.oc * P, P});
  } else {
    const int64_t ldd = CeilDiv(R, 16) * 16;
    float* d = ThreadWork(size_t(p.oc) * ldd, 1);
    // A copy is worth splitting over the threads at fewer elements than
    // a product is (the copy waits on dy's scattered planes).
#pragma omp parallel for schedule(static) if (p.oc * ldd > kParallelCopy)
    for (int m = 0; m < p.oc; ++m) {
      float* row = d + m * ldd;
      for (int b = 0; b < p.n; ++b)
        std::copy(dy + (int64_t(b) * p.oc + m) * P,
                  dy + (int64_t(b) * p.oc + m + 1) * P, row + b * P);
      std::fill(row + R, row + ldd, 0.f);
    }
    for (int g = 0; g < p.groups; ++g)
      jobs.push_back(NtJob{InputRows(x, p, taps, g), Grid{p.n, oh, ow}, mg,
                           d + int64_t(g) * mg * ldd, ldd, 0, ldd});
  }

  // A reduction that fits one packed block (1024 columns) needs no lane-wise
  // accumulators: its column blocks can be as wide as the threads allow.
  // Longer ones keep the accumulators within 1 MiB, and from a copy of dy
  // (1024-column blocks) take at most 32 rows, so that a packed block is
  // 128 KiB: 0.79-0.97x the time for ResNet-18's 128->256 stride-2 layer
  // at batch 32 and 64, which took 64 rows before (AVX2 Zen 4, 1 and 2
  // threads, alternating in one process; doc/performance.md). With AVX-512
  // on Zen 5 the cap cost time instead: without it LeNet's second weight
  // gradient took 0.90-0.91x at one thread and 0.90-0.93x at two, the
  // 128->256 stride-2 layer 0.96x and 0.96-0.97x, 256->512 even; the AVX2
  // kernels there gained too (0.94-0.99x), but the cap was measured on
  // Zen 4 for them, so it stays.
  const int nt = NtRows();
  int64_t kcap = R <= 1024 ? CeilDiv(CeilDiv(K, MaxThreads()), nt) * nt
                           : std::min<int64_t>(
                                 128, (int64_t(1) << 18) / (CeilDiv(mg, 4) * 4 * 16));
  if (R > 1024 && !in_place && ActiveIsa() != Isa::kAvx512)
    kcap = std::min<int64_t>(kcap, 32);
  int kb = int(std::clamp<int64_t>(kcap / nt * nt, nt, CeilDiv(K, nt) * nt));
  int64_t kblocks = CeilDiv(K, kb);
  const int threads = ThreadsFor(R * p.oc * K);

  // Column blocks, one per thread, need no partial sums but have every
  // thread read all of dy; the split of the reduction below reads dy once
  // but writes and adds threads - 1 partial copies of dw. Column blocks
  // were faster unless dy's rows are more than four times longer than dw's
  // (2 threads, AVX2 EPYC, alternating in one process: 0.69-0.95x the time
  // for the ResNet-18 stride-2 and 4x4 layers at batch 8-64, R / K = 0.1 to
  // 4; 1.06-1.08x for a 1x1 128->256 stride-2 layer at batch 32, R / K =
  // 16; about even at 8).
  const int64_t items0 = int64_t(p.groups) * kblocks;
  const bool by_columns = threads == 1 || items0 >= 2 * threads ||
                          (items0 % threads == 0 && 4 * int64_t(K) >= R);
  // Column blocks that do not divide among the threads leave one thread
  // waiting at the end: their number is rounded up to a multiple of the
  // thread count, the blocks made narrower. ResNet-18's 64->128 stride-2
  // layer (576 columns: 5 blocks of up to 128, now 6 of 96) took 0.88-0.90x
  // the time at two threads at batch 8 to 64, 0.90x with the AVX2 kernels;
  // the 5x5 one (13 blocks, now 14) 0.97-0.99x (Zen 5, alternating call by
  // call).
  if (by_columns && p.groups == 1 && kblocks % threads != 0) {
    kb = int(CeilDiv(CeilDiv(K, CeilDiv(kblocks, threads) * threads), nt) * nt);
    kblocks = CeilDiv(K, kb);
  }
  const int64_t items = int64_t(p.groups) * kblocks;
  const int64_t out = int64_t(p.oc) * K;  // dw floats, all groups
  const size_t work = NtWork(jobs[0], 0, kb);
  auto block = [&](int g, int64_t kbi, int64_t r0, int64_t r1, float* c,
                   float* buf) {
    const int k0 = int(kbi * kb), k1 = int(std::min<int64_t>(K, k0 + kb));
    RunNtBlock(jobs[size_t(g)], r0, r1, k0, k1, c + int64_t(g) * mg * K, K,
               false, buf);
  };

  if (by_columns) {
    // Threads take disjoint column blocks of dw, each over the whole
    // reduction.
#pragma omp parallel num_threads(threads) if (threads > 1)
    {
      float* buf = ThreadWork(work);
#pragma omp for schedule(dynamic, 1)
      for (int64_t i = 0; i < items; ++i)
        block(int(i / kblocks), i % kblocks, 0, R, dw, buf);
    }
    return;
  }
  // Few column blocks over a long reduction: thread t sums its share of the
  // reduction into its own copy of dw (thread 0 into dw itself); the copies
  // are added in thread order.
  std::vector<float> partial(size_t(threads - 1) * out);
#pragma omp parallel num_threads(threads)
  {
    const int t = ThreadId();
    float* buf = ThreadWork(work);
    float* c = t == 0 ? dw : partial.data() + size_t(t - 1) * out;
    // Shares start at multiples of 16 columns, where dy's padding agrees.
    const int64_t r0 = std::min(R, CeilDiv(R * t / threads, 16) * 16);
    const int64_t r1 = std::min(R, CeilDiv(R * (t + 1) / threads, 16) * 16);
    for (int64_t i = 0; i < items; ++i)
      block(int(i / kblocks), i % kblocks, r0, r1, c, buf);
#pragma omp barrier
#pragma omp for schedule(static)
    for (int64_t i = 0; i < out; ++i) {
      float s = dw[i];
      for (int u = 1; u < threads; ++u) s += partial[size_t(u - 1) * out + i];
      dw[i] = s;
    }
  }
}

void Conv2dBackwardBias(const float* dy, float* db, const ConvParams& p) {
  p.Validate();
  const size_t N = size_t(p.oh()) * p.ow();
  const int n = p.n, oc = p.oc;
  // Each image row is summed in float (vectorised, short), the per-image
  // partials in double so large batches do not lose precision.
#pragma omp parallel for schedule(static) \
    if (long(n) * oc * long(N) > kParallelMacs)
  for (int m = 0; m < oc; ++m) {
    double acc = 0.0;
    for (int i = 0; i < n; ++i) {
      const float* s = dy + (size_t(i) * oc + m) * N;
      float part = 0.f;
#pragma omp simd reduction(+ : part)
      for (size_t j = 0; j < N; ++j) part += s[j];
      acc += part;
    }
    db[m] = float(acc);
  }
}

}  // namespace cpu
}  // namespace singa
