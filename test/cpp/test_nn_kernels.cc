// Standalone checks for singa::cpu conv / pool / batch-norm kernels.
//
// Every kernel is compared with a direct, loop-per-definition reference that
// accumulates in double. Backward kernels are additionally compared with
// central finite differences of the double reference forward, so a mistake
// shared by a kernel and its reference backward would still be caught.
// Ends with timings of the LeNet conv layers used by the training benchmark.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include <omp.h>

#include "singa/core/cpu_isa.h"
#include "singa/core/nn_kernels.h"
#include "batchnorm.h"
#include "conv_engine.h"
#include "conv_shift.h"
#include "winograd.h"
#include "weight_cache.h"
#include "winograd_weight.h"

using namespace singa::cpu;
using Vec = std::vector<float>;
using DVec = std::vector<double>;

static int g_pass = 0, g_fail = 0;
// The ISA family the kernels run with, named in failure messages.
static std::string g_isa = "baseline";

static void Report(bool ok, const std::string& what, double err = 0) {
  if (ok) {
    ++g_pass;
  } else {
    ++g_fail;
    std::printf("FAIL [%s] %s (err %.3g)\n", g_isa.c_str(), what.c_str(),
                err);
  }
}

static uint64_t g_rng = 0x9e3779b97f4a7c15ULL;
static float Uniform() {
  g_rng ^= g_rng << 13;
  g_rng ^= g_rng >> 7;
  g_rng ^= g_rng << 17;
  return float((g_rng >> 11) * (1.0 / 9007199254740992.0)) * 2.f - 1.f;
}
static Vec Random(size_t n) {
  Vec v(n);
  for (auto& e : v) e = Uniform();
  return v;
}

// Max error relative to the largest reference magnitude; infinities must
// match exactly and NaNs must appear in the same places.
static double RelErr(const float* got, const double* ref, size_t n) {
  double scale = 1e-6, err = 0;
  for (size_t i = 0; i < n; ++i)
    if (std::isfinite(ref[i])) scale = std::max(scale, std::fabs(ref[i]));
  for (size_t i = 0; i < n; ++i) {
    if (std::isnan(ref[i]) || std::isnan(got[i])) {
      if (std::isnan(ref[i]) != std::isnan(got[i])) return INFINITY;
    } else if (std::isinf(ref[i]) || std::isinf(got[i])) {
      if (double(got[i]) != ref[i]) return INFINITY;
    } else {
      err = std::max(err, std::fabs(got[i] - ref[i]) / scale);
    }
  }
  return err;
}

static void Check(const std::string& what, const Vec& got, const DVec& ref,
                  double tol = 2e-5) {
  if (got.size() != ref.size()) return Report(false, what + " size", 0);
  const double e = RelErr(got.data(), ref.data(), got.size());
  Report(e <= tol, what, e);
}

// Central differences of a scalar function of `in` at up to `max_pts`
// coordinates, compared with the analytic gradient `grad`.
static void CheckFD(const std::string& what, const Vec& in,
                    const std::function<double(const DVec&)>& loss,
                    const Vec& grad, size_t max_pts = 48, double step = 1e-3,
                    double tol = 1e-4) {
  DVec x(in.begin(), in.end());
  const size_t stride = std::max<size_t>(1, in.size() / max_pts);
  double scale = 1e-6, err = 0;
  DVec fd;
  std::vector<size_t> idx;
  for (size_t i = 0; i < in.size(); i += stride) {
    const double keep = x[i];
    x[i] = keep + step;
    const double lp = loss(x);
    x[i] = keep - step;
    const double lm = loss(x);
    x[i] = keep;
    fd.push_back((lp - lm) / (2 * step));
    idx.push_back(i);
    scale = std::max(scale, std::fabs(fd.back()));
  }
  for (size_t k = 0; k < idx.size(); ++k)
    err = std::max(err, std::fabs(grad[idx[k]] - fd[k]) / scale);
  Report(err <= tol, what + " vs finite differences", err);
}

template <typename F>
static bool Throws(F f) {
  try {
    f();
  } catch (const std::invalid_argument&) {
    return true;
  }
  return false;
}

// ----------------------------------------------------------------- conv refs

static DVec RefConv(const DVec& x, const DVec& w, const DVec& b,
                    const ConvParams& p) {
  const int oh = p.oh(), ow = p.ow(), cg = p.c / p.groups,
            mg = p.oc / p.groups;
  DVec y(size_t(p.n) * p.oc * oh * ow);
  for (int i = 0; i < p.n; ++i)
    for (int m = 0; m < p.oc; ++m)
      for (int oy = 0; oy < oh; ++oy)
        for (int ox = 0; ox < ow; ++ox) {
          double acc = b.empty() ? 0.0 : b[m];
          const int g = m / mg;
          for (int cc = 0; cc < cg; ++cc)
            for (int ki = 0; ki < p.kh; ++ki)
              for (int kj = 0; kj < p.kw; ++kj) {
                const int iy = oy * p.sh - p.pad_t + ki * p.dh;
                const int ix = ox * p.sw - p.pad_l + kj * p.dw;
                if (iy < 0 || iy >= p.h || ix < 0 || ix >= p.w) continue;
                const int ci = g * cg + cc;
                acc += x[((size_t(i) * p.c + ci) * p.h + iy) * p.w + ix] *
                       w[((size_t(m) * cg + cc) * p.kh + ki) * p.kw + kj];
              }
          y[((size_t(i) * p.oc + m) * oh + oy) * ow + ox] = acc;
        }
  return y;
}

// Reference backward: scatters every forward product term into dx / dw / db.
static void RefConvBackward(const DVec& x, const DVec& w, const DVec& dy,
                            const ConvParams& p, DVec* dx, DVec* dw,
                            DVec* db) {
  const int oh = p.oh(), ow = p.ow(), cg = p.c / p.groups,
            mg = p.oc / p.groups;
  dx->assign(x.size(), 0.0);
  dw->assign(w.size(), 0.0);
  db->assign(p.oc, 0.0);
  for (int i = 0; i < p.n; ++i)
    for (int m = 0; m < p.oc; ++m)
      for (int oy = 0; oy < oh; ++oy)
        for (int ox = 0; ox < ow; ++ox) {
          const double g = dy[((size_t(i) * p.oc + m) * oh + oy) * ow + ox];
          (*db)[m] += g;
          for (int cc = 0; cc < cg; ++cc)
            for (int ki = 0; ki < p.kh; ++ki)
              for (int kj = 0; kj < p.kw; ++kj) {
                const int iy = oy * p.sh - p.pad_t + ki * p.dh;
                const int ix = ox * p.sw - p.pad_l + kj * p.dw;
                if (iy < 0 || iy >= p.h || ix < 0 || ix >= p.w) continue;
                const size_t xi =
                    ((size_t(i) * p.c + (m / mg) * cg + cc) * p.h + iy) * p.w +
                    ix;
                const size_t wi = ((size_t(m) * cg + cc) * p.kh + ki) * p.kw +
                                  kj;
                (*dx)[xi] += g * w[wi];
                (*dw)[wi] += g * x[xi];
              }
        }
}

static DVec D(const Vec& v) { return DVec(v.begin(), v.end()); }

static double Dot(const DVec& a, const DVec& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

static void TestConv(const std::string& name, ConvParams p, bool fd) {
  const int cg = p.c / p.groups;
  const size_t ysz = size_t(p.n) * p.oc * p.oh() * p.ow();
  Vec x = Random(size_t(p.n) * p.c * p.h * p.w);
  Vec w = Random(size_t(p.oc) * cg * p.kh * p.kw);
  Vec b = Random(p.oc), dy = Random(ysz);
  Vec y(ysz), ynb(ysz), dx(x.size()), dw(w.size()), db(p.oc);
  // Garbage in the outputs proves they are overwritten, not accumulated.
  std::fill(dx.begin(), dx.end(), 7.f);
  std::fill(dw.begin(), dw.end(), 7.f);
  Conv2dForward(x.data(), w.data(), b.data(), y.data(), p);
  Conv2dForward(x.data(), w.data(), nullptr, ynb.data(), p);
  Conv2dBackwardData(dy.data(), w.data(), dx.data(), p);
  Conv2dBackwardWeight(x.data(), dy.data(), dw.data(), p);
  Conv2dBackwardBias(dy.data(), db.data(), p);

  const DVec xd = D(x), wd = D(w), bd = D(b), dyd = D(dy);
  Check(name + " forward", y, RefConv(xd, wd, bd, p));
  Check(name + " forward no bias", ynb, RefConv(xd, wd, DVec(), p));
  DVec rdx, rdw, rdb;
  RefConvBackward(xd, wd, dyd, p, &rdx, &rdw, &rdb);
  Check(name + " backward data", dx, rdx);
  Check(name + " backward weight", dw, rdw);
  Check(name + " backward bias", db, rdb);
  if (!fd) return;
  CheckFD(name + " dx", x,
          [&](const DVec& v) { return Dot(RefConv(v, wd, bd, p), dyd); }, dx);
  CheckFD(name + " dw", w,
          [&](const DVec& v) { return Dot(RefConv(xd, v, bd, p), dyd); }, dw);
  CheckFD(name + " db", b,
          [&](const DVec& v) { return Dot(RefConv(xd, wd, v, p), dyd); }, db);
}

static void TestIm2Col() {
  struct Case { int c, h, w, kh, kw, pt, pl, pb, pr, sh, sw, dh, dw; };
  const Case cases[] = {{2, 5, 6, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
                        {3, 9, 7, 3, 2, 0, 2, 1, 0, 2, 3, 2, 1},
                        {1, 4, 4, 5, 5, 2, 2, 2, 2, 1, 1, 1, 1}};
  for (const Case& k : cases) {
    const int oh = WindowOutputSize(k.h, k.kh, k.sh, k.pt, k.pb, k.dh);
    const int ow = WindowOutputSize(k.w, k.kw, k.sw, k.pl, k.pr, k.dw);
    const size_t rows = size_t(k.c) * k.kh * k.kw, N = size_t(oh) * ow;
    Vec im = Random(size_t(k.c) * k.h * k.w), col(rows * N);
    Im2Col(im.data(), k.c, k.h, k.w, k.kh, k.kw, k.pt, k.pl, k.pb, k.pr, k.sh,
           k.sw, k.dh, k.dw, col.data());
    DVec ref(rows * N, 0.0), back(im.size(), 0.0);
    Vec r = Random(rows * N), got(im.size(), 5.f);
    for (int ci = 0; ci < k.c; ++ci)
      for (int ki = 0; ki < k.kh; ++ki)
        for (int kj = 0; kj < k.kw; ++kj)
          for (int oy = 0; oy < oh; ++oy)
            for (int ox = 0; ox < ow; ++ox) {
              const int iy = oy * k.sh - k.pt + ki * k.dh;
              const int ix = ox * k.sw - k.pl + kj * k.dw;
              const size_t row = (size_t(ci) * k.kh + ki) * k.kw + kj;
              const size_t at = row * N + size_t(oy) * ow + ox;
              if (iy < 0 || iy >= k.h || ix < 0 || ix >= k.w) continue;
              const size_t src = (size_t(ci) * k.h + iy) * k.w + ix;
              ref[at] = im[src];
              back[src] += r[at];
            }
    Check("Im2Col", col, ref, 0);
    Col2Im(r.data(), k.c, k.h, k.w, k.kh, k.kw, k.pt, k.pl, k.pb, k.pr, k.sh,
           k.sw, k.dh, k.dw, got.data());
    Check("Col2Im", got, back);
  }
}

static ConvParams CP(int n, int c, int h, int w, int oc, int kh, int kw,
                     int sh, int sw, int pt, int pl, int pb, int pr, int dh,
                     int dw, int g) {
  return ConvParams{n, c, h, w, oc, kh, kw, sh, sw, pt, pl, pb, pr, dh, dw, g};
}

// Cases aimed at the implicit-GEMM engine (conv_engine.h): every row-tile
// height and its tails, pixel counts that leave partial column tiles, long
// reductions split into blocks, windows lying wholly in padding, both forms
// of the data gradient (gather when the input has more channels, scatter
// otherwise), and 1 and 3 threads.
static void TestEngineCases() {
  for (int oc : {1, 2, 3, 7, 9, 11, 13, 17, 23, 25})
    TestConv("conv rows oc=" + std::to_string(oc),
             CP(2, 3, 4, 5, oc, 2, 3, 1, 1, 0, 1, 1, 0, 1, 1, 1), false);
  for (int c : {1, 5, 9, 14})
    TestConv("conv gather c=" + std::to_string(c),
             CP(2, c, 5, 7, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1), false);
  const int saved = omp_get_max_threads();
  for (int t : {1, 3}) {
    omp_set_num_threads(t);
    const std::string th = " (" + std::to_string(t) + " threads)";
    // 90 * 3 * 3 = 810 taps: two reduction blocks forward; gather backward.
    TestConv("conv long reduction" + th,
             CP(2, 90, 6, 7, 13, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1), false);
    // 800 output channels: the scatter backward reduces in two blocks.
    TestConv("conv wide output" + th,
             CP(1, 2, 5, 5, 800, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1), false);
    // Pads beyond the kernel: whole windows in padding, both backward forms.
    TestConv("conv pad>kernel scatter" + th,
             CP(2, 3, 5, 6, 4, 2, 2, 1, 1, 3, 2, 3, 1, 1, 1, 1), true);
    TestConv("conv pad>kernel gather" + th,
             CP(2, 5, 5, 6, 2, 2, 2, 1, 1, 3, 2, 3, 1, 1, 1, 1), true);
    // Stride 3 x 2 with dilation: some phases of dx get no tap.
    TestConv("conv stride3 dil2 gather" + th,
             CP(2, 6, 13, 11, 3, 3, 3, 3, 2, 2, 1, 1, 2, 2, 3, 1), true);
    TestConv("conv stride3 dil2 scatter" + th,
             CP(2, 3, 13, 11, 6, 3, 3, 3, 2, 2, 1, 1, 2, 2, 3, 1), true);
    // Long reductions for the weight gradient (over 1024 pixels), split
    // over threads by columns or by pixels, with odd sizes.
    TestConv("conv long dw" + th,
             CP(5, 3, 23, 21, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1), false);
    TestConv("conv long dw groups" + th,
             CP(3, 6, 19, 25, 9, 3, 5, 2, 1, 2, 1, 0, 2, 1, 1, 3), false);
    TestConv("conv 1x1 stride2 wide" + th,
             CP(3, 20, 9, 10, 36, 1, 1, 2, 2, 0, 0, 0, 0, 1, 1, 1), false);
    // A short reduction (75 pixels) and 360 columns of dw: on 3 threads one
    // column block each, with no partial sums.
    TestConv("conv short dw wide" + th,
             CP(3, 40, 10, 9, 21, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1), false);
  }
  omp_set_num_threads(saved);
}

// The Winograd weight gradient (winograd_weight.h), with 2x2 and with 4x4
// dy tiles: odd planes and planes that leave partial tiles, pads 0, 1, 2
// and asymmetric ones, channel counts that are not multiples of the vector
// width or the register tile, a one-row plane, and a reduction long enough
// to take several tile blocks; on 1, 2 and 5 threads (which split the
// output channels or the tiles), each run twice to the same bits.
static void TestWinogradWeight() {
  const ConvParams cases[] = {
      CP(2, 17, 7, 9, 19, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1),
      CP(3, 16, 6, 5, 21, 3, 3, 1, 1, 0, 0, 0, 0, 1, 1, 1),
      CP(2, 23, 5, 8, 16, 3, 3, 1, 1, 2, 2, 2, 2, 1, 1, 1),
      CP(2, 18, 9, 6, 33, 3, 3, 1, 1, 2, 0, 1, 2, 1, 1, 1),
      CP(2, 16, 1, 9, 17, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1),
      CP(2, 20, 7, 6, 9, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1),
      CP(16, 20, 16, 15, 18, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1),
      CP(3, 16, 13, 11, 16, 3, 3, 1, 1, 0, 1, 2, 0, 1, 1, 1),
      CP(2, 16, 2, 3, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1),
  };
  const int saved = omp_get_max_threads();
  for (const ConvParams& p : cases)
    for (int tile : {2, 4}) {
      SetWinogradWeightTile(tile);
      const std::string name =
          "winograd dw tile " + std::to_string(tile) + " n" +
          std::to_string(p.n) + " c" + std::to_string(p.c) + " " +
          std::to_string(p.h) + "x" + std::to_string(p.w) + " oc" +
          std::to_string(p.oc) + " pads " + std::to_string(p.pad_t) +
          std::to_string(p.pad_l) + std::to_string(p.pad_b) +
          std::to_string(p.pad_r);
      Report(WinogradWeightEligible(p), name + " takes the Winograd path");
      const size_t ysz = size_t(p.n) * p.oc * p.oh() * p.ow();
      Vec x = Random(size_t(p.n) * p.c * p.h * p.w), dy = Random(ysz);
      Vec w(size_t(p.oc) * p.c * 9);
      DVec rdx, rdw, rdb;
      RefConvBackward(D(x), D(w), D(dy), p, &rdx, &rdw, &rdb);
      for (int t : {1, 2, 5}) {
        omp_set_num_threads(t);
        Vec dw(w.size(), 7.f), again(w.size(), 5.f);
        Conv2dBackwardWeight(x.data(), dy.data(), dw.data(), p);
        Check(name + " (" + std::to_string(t) + " threads)", dw, rdw);
        Conv2dBackwardWeight(x.data(), dy.data(), again.data(), p);
        Report(again == dw, name + " same bits when run again (" +
                                std::to_string(t) + " threads)");
      }
    }
  SetWinogradWeightTile(0);
  omp_set_num_threads(saved);
  // The rule: 4x4 tiles where the batch has many (ResNet-18's 64@32 at batch
  // 1, 512@4 at 32), 2x2 where it has few (512@4 at batch 8, a 2x2 plane).
  auto tile_for = [](int n, int c, int hw) {
    return WinogradWeightTile(CP(n, c, hw, hw, c, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1));
  };
  Report(tile_for(1, 64, 32) == 4 && tile_for(32, 512, 4) == 4 &&
             tile_for(8, 512, 4) == 2 && tile_for(64, 64, 2) == 2,
         "winograd dw tile rule");
  TestConv("winograd dw with fd",
           CP(2, 16, 5, 7, 17, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1), true);
  SetWinogradWeightTile(4);
  TestConv("winograd dw tile 4 with fd",
           CP(2, 16, 9, 7, 17, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1), true);
  SetWinogradWeightTile(0);
}

// The tap-scatter data gradient for few input channels (conv_taps_dx.h,
// stride 1, one group, kernels up to 7 rows): one to four channels, odd and
// narrow sizes (rows ending in a short vector, a tile's spots spanning dy
// rows, a short last group of spots), even and wide kernels, pads beyond
// the kernel, dx summed in place (no padding, rows of whole vectors) or in
// the padded plane, dy large enough to be fetched ahead; the strided and
// grouped cases of the same sizes take the other forms. Then 1x1 stride-2
// kernels. 1 and 2 threads.
static void TestTapsDx() {
  const int saved = omp_get_max_threads();
  for (int t : {1, 2}) {
    omp_set_num_threads(t);
    const std::string th = " (" + std::to_string(t) + " threads)";
    for (int c = 1; c <= 4; ++c) {
      const std::string cs = " c=" + std::to_string(c) + th;
      TestConv("taps dx 3x3 odd" + cs,
               CP(2, c, 11, 19, 4 + c, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1),
               c <= 2);
      TestConv("taps dx 4x2 asym pads" + cs,
               CP(2, c, 9, 33, 7, 4, 2, 1, 1, 2, 0, 1, 1, 1, 1, 1), false);
      TestConv("taps dx 7x6 narrow" + cs,
               CP(3, c, 7, 5, 6, 7, 6, 1, 1, 3, 2, 3, 4, 1, 1, 1), false);
      TestConv("taps dx pad>kernel" + cs,
               CP(2, c, 5, 6, 4, 2, 2, 1, 1, 3, 3, 2, 3, 1, 1, 1), c == 1);
      TestConv("taps dx 5x5 lenet-like" + cs,
               CP(3, c, 28, 28, 6, 5, 5, 1, 1, 0, 0, 0, 0, 1, 1, 1), false);
      TestConv("taps dx 1x1" + cs,
               CP(2, c, 6, 17, 5, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1), false);
      // 30 output channels of 40 x 40 planes.
      TestConv("taps dx 40x40" + cs,
               CP(1, c, 40, 40, 30, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1), false);
      // Batches of 5 and 7 images, rows of 28, 20 and 10-12 floats (whole
      // vectors or a short last one, depending on the vector width), dx in
      // place or padded.
      TestConv("taps dx lenet batch 7" + cs,
               CP(7, c, 28, 28, 6, 5, 5, 1, 1, 0, 0, 0, 0, 1, 1, 1), false);
      TestConv("taps dx 20 wide" + cs,
               CP(7, c, 9, 20, 5, 5, 5, 1, 1, 0, 0, 0, 0, 1, 1, 1), c == 1);
      TestConv("taps dx pads batch 5" + cs,
               CP(5, c, 7, 10, 4, 3, 3, 1, 1, 1, 2, 0, 1, 1, 1, 1), c == 2);
      TestConv("taps dx 30 outputs" + cs,
               CP(5, c, 28, 28, 30, 5, 5, 1, 1, 0, 0, 0, 0, 1, 1, 1), false);
      TestConv("small c stride2" + cs,
               CP(2, c, 11, 12, 8, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1), false);
      TestConv("small c dilation2" + cs,
               CP(2, c, 11, 12, 8, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2, 1), false);
    }
    // dy of 8 MiB and more is fetched ahead, each image's last spots
    // fetching the next image's first (1x1 and 5x5 kernels, 512 outputs).
    TestConv("taps dx large dy 1x1" + th,
             CP(4, 1, 32, 32, 512, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1), false);
    TestConv("taps dx large dy 5x5" + th,
             CP(8, 2, 28, 28, 512, 5, 5, 1, 1, 0, 0, 0, 0, 1, 1, 1), false);
    // The same for the flat-shift weight gradient (K = 25).
    TestConv("taps dx and shift dw large dy 5x5" + th,
             CP(4, 1, 32, 32, 512, 5, 5, 1, 1, 2, 2, 2, 2, 1, 1, 1), false);
    TestConv("small c 9x9 kernel" + th,
             CP(2, 3, 12, 13, 5, 9, 9, 1, 1, 4, 4, 4, 4, 1, 1, 1), false);
    // Pixels that fill one slab and a long reduction: at 2 threads the
    // product is split by input channels and the shares added (one and two
    // images, a 3x3 window with padding and a 1x1 with an odd pixel count).
    TestConv("one slab, long reduction 4x4" + th,
             CP(1, 256, 4, 4, 40, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1), false);
    TestConv("one slab, long reduction 2 images" + th,
             CP(2, 256, 2, 3, 17, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1), false);
    TestConv("one slab, long reduction 1x1" + th,
             CP(1, 2100, 3, 5, 24, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1), false);
    // One panel of pixels with more rows than one reduction block holds.
    TestConv("one panel, reduction in blocks" + th,
             CP(1, 1000, 3, 3, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1), false);
    // 1x1 stride 2 (the written-whole rows of BackwardDataPointwiseS2): odd
    // and even sizes, rows longer than a tile, groups, and bottom/right pads
    // that do or do not add an output row past the input.
    TestConv("1x1 s2 odd" + th,
             CP(2, 8, 7, 37, 16, 1, 1, 2, 2, 0, 0, 0, 0, 1, 1, 1), true);
    TestConv("1x1 s2 wide" + th,
             CP(2, 16, 32, 32, 32, 1, 1, 2, 2, 0, 0, 0, 0, 1, 1, 1), false);
    TestConv("1x1 s2 groups" + th,
             CP(3, 6, 10, 33, 12, 1, 1, 2, 2, 0, 0, 0, 0, 1, 1, 2), false);
    TestConv("1x1 s2 pad odd" + th,
             CP(2, 4, 5, 7, 8, 1, 1, 2, 2, 0, 0, 1, 1, 1, 1, 1), true);
    TestConv("1x1 s2 pad even" + th,
             CP(2, 4, 6, 6, 8, 1, 1, 2, 2, 0, 0, 1, 1, 1, 1, 1), true);
  }
  omp_set_num_threads(saved);
}

// Winograd F(4x4, 3x3) and F(2x2, 3x3) (winograd.h), each forced onto
// every qualifying layer: odd planes and planes that are not a multiple of
// the tile, pads 0 to 2 and asymmetric ones (and a pad of 3, whose data
// gradient falls back), channel counts off the vector width and the 6-row
// register tile, several panels of tiles per block, a deep reduction,
// weights transformed once or per block, blocks split by output channels,
// and 1 and 2 threads.
static void TestWinogradCases() {
  SetWinogradMode(WinogradMode::kForce);
  const int saved = omp_get_max_threads();
  for (int tile : {4, 2})
  for (int t : {1, 2}) {
    SetWinogradTile(tile);
    omp_set_num_threads(t);
    const std::string th = " (tile " + std::to_string(tile) + ", " +
                           std::to_string(t) + " threads)";
    TestConv("wino basic" + th,
             CP(2, 3, 7, 9, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1), true);
    TestConv("wino pad0" + th,
             CP(2, 5, 9, 10, 7, 3, 3, 1, 1, 0, 0, 0, 0, 1, 1, 1), true);
    TestConv("wino pad2" + th,
             CP(1, 4, 5, 6, 3, 3, 3, 1, 1, 2, 2, 2, 2, 1, 1, 1), true);
    TestConv("wino asym pads" + th,
             CP(2, 6, 11, 8, 9, 3, 3, 1, 1, 0, 1, 2, 1, 1, 1, 1), true);
    TestConv("wino pad3 fallback" + th,
             CP(1, 3, 5, 5, 4, 3, 3, 1, 1, 3, 1, 3, 1, 1, 1, 1), false);
    TestConv("wino tiny plane" + th,
             CP(3, 7, 1, 2, 11, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1), false);
    for (int c : {1, 13, 19, 37})
      TestConv("wino channels c=" + std::to_string(c) + th,
               CP(3, c, 13, 11, 43 - c, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1),
               false);
    // Many tiles: several panels and blocks, split over the threads.
    TestConv("wino many tiles" + th,
             CP(9, 17, 18, 21, 23, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1), false);
    // One block of tiles: two threads split its output channels.
    TestConv("wino split channels" + th,
             CP(1, 24, 8, 7, 40, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1), false);
    // A ResNet-depth reduction (512 channels) on a small odd plane.
    TestConv("wino deep" + th,
             CP(1, 512, 5, 6, 512, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1), false);
    // Weights transformed per block (over 2M floats of U), in more than one
    // block when two threads split the tiles.
    TestConv("wino deep blocks" + th,
             CP(4, 256, 9, 9, 250, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1), false);
  }
  omp_set_num_threads(saved);
  SetWinogradTile(0);
  SetWinogradMode(WinogradMode::kAuto);
  // The automatic choice on ResNet-like shapes (Winograd where it pays,
  // 2x2 tiles on the small planes at batch 1).
  TestConv("wino auto 64@8",
           CP(4, 64, 8, 8, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1), false);
  TestConv("wino auto 32@16 batch 1",
           CP(1, 32, 16, 16, 48, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1), false);
  TestConv("wino auto 2x2 tiles 96@8 batch 1",
           CP(1, 96, 8, 8, 80, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1), false);
  // The rule on ResNet-18's 3x3 stride-1 layers (32x32 inputs). With
  // AVX2's 16-tile panels: 4x4 tiles where they fill half a panel, 2x2 on
  // the 8x8 planes at batch 1, none on 4x4 planes below batch 8 or with 3
  // input channels. The other families' panels (8 and 32 tiles) move the
  // thresholds.
  auto tile = [](int n, int c, int hw) {
    return WinogradForwardTile(CP(n, c, hw, hw, c == 3 ? 64 : c, 3, 3, 1, 1, 1,
                                  1, 1, 1, 1, 1, 1));
  };
  Report(tile(32, 64, 32) == 4 && tile(1, 512, 4) == 0 && tile(32, 3, 32) == 0,
         "winograd forward tile rule");
  if (ActiveIsa() == Isa::kAvx2)
    Report(tile(1, 64, 32) == 4 && tile(1, 128, 16) == 4 && tile(1, 256, 8) == 2 &&
               tile(2, 256, 8) == 4 && tile(4, 512, 4) == 0 && tile(8, 512, 4) == 4,
           "winograd forward tile rule (AVX2)");
}

// The kept weight transforms (weight_cache.h): with a stamp the first
// call fills the cache and the next one finds it, both giving exactly the
// uncached result (stamp 0); a new stamp (weights written) gives the new
// weights' result; the forward and the data gradient keep separate
// transforms; the bound is kept. (Winograd's results may differ in the last
// bits between 1 and 2 threads, with or without the cache.)
static void TestWinogradCache() {
  SetWinogradMode(WinogradMode::kForce);
  const int saved = omp_get_max_threads();
  const size_t bound = 32u << 20;
  uint64_t stamp = 1000;
  for (int t : {1, 2}) {
    omp_set_num_threads(t);
    const std::string th = " (" + std::to_string(t) + " threads)";
    // Odd plane, channel counts off the 6-row tile and the vector width.
    ConvParams p = CP(2, 19, 13, 11, 23, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1);
    const size_t ysz = size_t(p.n) * p.oc * p.oh() * p.ow();
    Vec x = Random(size_t(p.n) * p.c * p.h * p.w), b = Random(p.oc);
    Vec w = Random(size_t(p.oc) * p.c * 9), dy = Random(ysz);
    auto fwd = [&](uint64_t s) {
      Vec y(ysz);
      p.w_stamp = s;
      Conv2dForward(x.data(), w.data(), b.data(), y.data(), p);
      return y;
    };
    auto bwd = [&](uint64_t s) {
      Vec dx(x.size());
      p.w_stamp = s;
      Conv2dBackwardData(dy.data(), w.data(), dx.data(), p);
      return dx;
    };
    ClearWeightCache();
    SetWeightCacheBytes(bound);
    const Vec y0 = fwd(0), dx0 = bwd(0);
    Report(GetWeightCacheStats().misses == 0 &&
               GetWeightCacheStats().entries == 0,
           "wino cache: stamp 0 is never kept" + th);
    const uint64_t s1 = ++stamp;
    const Vec y1 = fwd(s1);
    const size_t fwd_bytes = GetWeightCacheStats().bytes;
    const Vec y2 = fwd(s1);
    WeightCacheStats st = GetWeightCacheStats();
    Report(st.misses == 1 && st.hits == 1 && st.entries == 1,
           "wino cache: fill then hit" + th);
    Report(y1 == y0 && y2 == y0, "wino cache: forward equals uncached" + th);
    Check("wino cache forward" + th, y2, RefConv(D(x), D(w), D(b), p));
    const Vec dx1 = bwd(s1), dx2 = bwd(s1);
    st = GetWeightCacheStats();
    Report(st.misses == 2 && st.hits == 2 && st.entries == 2,
           "wino cache: data gradient keeps its own transform" + th);
    Report(dx1 == dx0 && dx2 == dx0,
           "wino cache: data gradient equals uncached" + th);
    DVec rdx, rdw, rdb;
    RefConvBackward(D(x), D(w), D(dy), p, &rdx, &rdw, &rdb);
    Check("wino cache backward data" + th, dx2, rdx);

    // The weights change in place: only the stamp tells the cache. Kept
    // with the old stamp, the old transform is (by contract) still used,
    // which shows the second call above did not transform again.
    for (float& v : w) v = Uniform();
    Report(fwd(s1) == y0, "wino cache: an unchanged stamp reuses" + th);
    const uint64_t s2 = ++stamp;
    const Vec y3 = fwd(s2), y3u = fwd(0);
    Report(y3 == y3u && y3 != y0, "wino cache: a new stamp transforms again" + th);
    Check("wino cache new weights" + th, y3, RefConv(D(x), D(w), D(b), p));
    const Vec dx3 = bwd(s2);
    Report(dx3 == bwd(0), "wino cache: data gradient after new stamp" + th);
    st = GetWeightCacheStats();
    Report(st.entries == 2, "wino cache: a stale entry is replaced" + th);

    // A bound too small for both transforms: the least recently used (the
    // forward's) goes; a transform over the bound is not kept at all.
    const size_t both = st.bytes;
    SetWeightCacheBytes(both - 4);
    st = GetWeightCacheStats();
    Report(st.entries == 1 && st.bytes == both - fwd_bytes,
           "wino cache: the bound evicts the least recently used" + th);
    Vec w2 = Random(w.size());
    std::swap(w, w2);
    const Vec y4 = fwd(++stamp);
    st = GetWeightCacheStats();
    Report(st.bytes <= both - 4 && y4 == fwd(0),
           "wino cache: a fill keeps the bound" + th);
    SetWeightCacheBytes(fwd_bytes - 4);
    const uint64_t before = GetWeightCacheStats().misses;
    Report(fwd(++stamp) == y4 && GetWeightCacheStats().entries == 0 &&
               GetWeightCacheStats().misses == before,
           "wino cache: a transform over the bound is not kept" + th);
    SetWeightCacheBytes(bound);

    // Weights transformed per block (over 2M floats of U) are not kept.
    ConvParams big = CP(1, 256, 6, 6, 256, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1);
    Vec bx = Random(size_t(big.c) * 36), bw = Random(size_t(big.oc) * big.c * 9);
    Vec by(size_t(big.oc) * 36);
    big.w_stamp = ++stamp;
    ClearWeightCache();
    Conv2dForward(bx.data(), bw.data(), nullptr, by.data(), big);
    Report(GetWeightCacheStats().entries == 0,
           "wino cache: per-block transforms are not kept" + th);
    Check("wino cache per-block forward" + th, by, RefConv(D(bx), D(bw), DVec(), big));
  }
  omp_set_num_threads(saved);
  ClearWeightCache();
  SetWinogradMode(WinogradMode::kAuto);
}

// The cache's own rules (weight_cache.h), on buffers that count their
// fills: kSecondCall fills on the second call with a stamp; a buffer used
// within the last two rounds of calls is not evicted for a new one (the
// caller gets none and does without), one left unused longer is.
static void TestWeightCacheRules() {
  ClearWeightCache();
  SetWeightCacheBytes(1000 * sizeof(float));
  const float* a = reinterpret_cast<const float*>(uintptr_t(64));
  const float* b = reinterpret_cast<const float*>(uintptr_t(128));
  int fills = 0;
  auto fill = [&](float* u) {
    ++fills;
    u[0] = float(fills);
  };
  auto get = [&](const float* w, uint64_t stamp, Fill when) {
    return CachedWeights(WeightKey{stamp, w, 1, 1, false, kPanelForm, 0}, 600, fill, when);
  };
  Report(!get(a, 7, Fill::kSecondCall) && fills == 0,
         "weight cache: a first call under kSecondCall only marks");
  Report(!get(a, 8, Fill::kSecondCall) && fills == 0,
         "weight cache: a new stamp marks again");
  auto ua = get(a, 8, Fill::kSecondCall);
  Report(ua && fills == 1 && get(a, 8, Fill::kSecondCall) == ua && fills == 1,
         "weight cache: the second call fills, the third finds it");
  ua.reset();
  Report(!get(b, 9, Fill::kFirstCall) && fills == 1 &&
             get(a, 8, Fill::kSecondCall) != nullptr && fills == 1,
         "weight cache: a recently used buffer is not evicted for a new one");
  std::shared_ptr<const float> ub;
  int kept_after = 0;
  for (int i = 1; i <= 8; ++i) {
    ub = get(b, 9, Fill::kFirstCall);
    if (ub && !kept_after) kept_after = i;
  }
  Report(kept_after == 3 && fills == 2 && GetWeightCacheStats().entries == 1 &&
             GetWeightCacheStats().bytes == 600 * sizeof(float) &&
             !get(a, 8, Fill::kSecondCall),
         "weight cache: a buffer unused for two rounds goes");
  ClearWeightCache();
  SetWeightCacheBytes(size_t(64) << 20);
}

// The forward's weight panels (conv_cpp.cc WeightPanels), on a layer whose
// pixels fit the one-vector tile: kept from the second call with a stamp
// (on families that have the tile), every call equal to the uncached result
// and the reference, a new stamp not using the old panels; output channels
// off the panel's rows, 1 and 2 threads.
static void TestWeightPanels() {
  SetWinogradMode(WinogradMode::kOff);
  const int saved = omp_get_max_threads();
  const bool tile = ActiveIsa() == Isa::kAvx512;
  uint64_t stamp = 5000;
  for (int t : {1, 2}) {
    omp_set_num_threads(t);
    const std::string th = " (" + std::to_string(t) + " threads)";
    for (ConvParams p : {CP(1, 40, 4, 4, 61, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1),
                         CP(1, 300, 8, 8, 30, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1)}) {
      const size_t ysz = size_t(p.oc) * p.oh() * p.ow();
      Vec x = Random(size_t(p.c) * p.h * p.w), b = Random(p.oc);
      Vec w = Random(size_t(p.oc) * p.c * p.kh * p.kw);
      auto fwd = [&](uint64_t s) {
        Vec y(ysz);
        p.w_stamp = s;
        Conv2dForward(x.data(), w.data(), b.data(), y.data(), p);
        return y;
      };
      ClearWeightCache();
      const Vec y0 = fwd(0);
      const uint64_t s1 = ++stamp;
      const Vec y1 = fwd(s1), y2 = fwd(s1), y3 = fwd(s1);
      Report(GetWeightCacheStats().entries == (tile ? 1u : 0u) &&
                 GetWeightCacheStats().hits == (tile ? 1u : 0u),
             "weight panels: kept from the second call" + th);
      Report(y1 == y0 && y2 == y0 && y3 == y0, "weight panels: equal to uncached" + th);
      Check("weight panels forward" + th, y3, RefConv(D(x), D(w), D(b), p));
      for (float& v : w) v = Uniform();
      const uint64_t s2 = ++stamp;
      const Vec y4 = fwd(s2), y5 = fwd(s2), y6 = fwd(s2);
      Report(y4 == fwd(0) && y5 == y4 && y6 == y4 && y4 != y0,
             "weight panels: a new stamp does not use the old panels" + th);
      Check("weight panels new weights" + th, y6, RefConv(D(x), D(w), D(b), p));
    }
  }
  omp_set_num_threads(saved);
  ClearWeightCache();
  SetWinogradMode(WinogradMode::kAuto);
}

// The flat-shift forward (conv_shift.h), forced onto every qualifying layer:
// 1 to 4 input channels, kernels 1x1 to 5x5 and non-square ones, symmetric,
// asymmetric and no pads, odd widths, padded rows narrower and wider than a
// vector (several output rows per vector, or vectors holding a row's end and
// the next one's start), last tiles partly filled, row tiles with tails,
// the largest reduction it takes, batch 1 and several, 1 and 2 threads.
static void TestShiftCases() {
  SetShiftMode(ShiftMode::kForce);
  SetWinogradMode(WinogradMode::kOff);
  const int saved = omp_get_max_threads();
  for (int t : {1, 2}) {
    omp_set_num_threads(t);
    const std::string th = " (" + std::to_string(t) + " threads)";
    for (int c = 1; c <= 4; ++c) {
      const std::string cs = " c=" + std::to_string(c) + th;
      TestConv("shift 5x5 lenet" + cs,
               CP(3, c, 28, 28, 20, 5, 5, 1, 1, 0, 0, 0, 0, 1, 1, 1), c == 1);
      TestConv("shift 3x3 pad1 odd" + cs,
               CP(2, c, 13, 17, 7, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1), c == 2);
      TestConv("shift 1x1" + cs,
               CP(2, c, 5, 9, 13, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1), false);
      TestConv("shift 2x2 asym pads" + cs,
               CP(1, c, 9, 11, 6, 2, 2, 1, 1, 0, 1, 2, 0, 1, 1, 1), c == 3);
      TestConv("shift 4x4 pads" + cs,
               CP(2, c, 10, 7, 11, 4, 4, 1, 1, 2, 1, 1, 2, 1, 1, 1), false);
      TestConv("shift 3x5 non-square" + cs,
               CP(2, c, 12, 15, 9, 3, 5, 1, 1, 1, 2, 1, 2, 1, 1, 1), false);
      TestConv("shift 5x2 narrow" + cs,
               CP(3, c, 8, 3, 5, 5, 2, 1, 1, 1, 0, 1, 1, 1, 1, 1), false);
      TestConv("shift 1x3 single row" + cs,
               CP(2, c, 1, 21, 4, 1, 3, 1, 1, 0, 1, 0, 1, 1, 1, 1), false);
      TestConv("shift 3x3 wide rows" + cs,
               CP(1, c, 5, 45, 25, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1), false);
    }
    TestConv("shift stem 3x3 64 ch" + th,
             CP(2, 3, 32, 32, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1), false);
    TestConv("shift K=64 max" + th,
             CP(2, 4, 9, 10, 14, 4, 4, 1, 1, 1, 2, 2, 1, 1, 1, 1), false);
    TestConv("shift 7x7 c1 odd batch" + th,
             CP(5, 1, 11, 13, 3, 7, 7, 1, 1, 3, 3, 3, 3, 1, 1, 1), false);
    TestConv("shift kernel>input" + th,
             CP(2, 2, 3, 4, 3, 5, 5, 1, 1, 2, 2, 2, 2, 1, 1, 1), true);
    // Not qualifying (reduction > kShiftMaxK, stride 2): the engine runs.
    TestConv("shift K=75 fallback" + th,
             CP(2, 3, 9, 9, 5, 5, 5, 1, 1, 2, 2, 2, 2, 1, 1, 1), false);
    TestConv("shift stride2 fallback" + th,
             CP(2, 2, 9, 9, 5, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1), false);
  }
  omp_set_num_threads(saved);
  SetWinogradMode(WinogradMode::kAuto);
  SetShiftMode(ShiftMode::kAuto);
}

// The weight gradient's two forms (conv_nt_isa.cc), each forced onto every
// product: broadcast and lane-wise. 1x1 kernels at strides 1, 2 and 3
// (copied directly in the broadcast form), with pads and with rows too
// narrow for the direct copy (both packed the general way), dy read in
// place (whole images per block in the lane-wise form with AVX-512) and
// from a copy, reductions over several slices, dw rows and columns that
// leave partial tiles, several k blocks, groups, and 1, 2 and 5 threads
// (column blocks or split reductions); then the automatic choice on a long
// 1x1 stride-2 reduction.
static void TestNtForms() {
  SetShiftMode(ShiftMode::kOff);
  SetWinogradMode(WinogradMode::kOff);
  const int saved = omp_get_max_threads();
  for (PathMode mode : {PathMode::kForce, PathMode::kOff}) {
    SetNtBroadcastMode(mode);
    const std::string form =
        mode == PathMode::kForce ? "broadcast dw " : "lane-wise dw ";
    for (int t : {1, 2, 5}) {
      omp_set_num_threads(t);
      const std::string th = " (" + std::to_string(t) + " threads)";
      TestConv(form + "1x1 s2 in place" + th,
               CP(5, 20, 32, 32, 13, 1, 1, 2, 2, 0, 0, 0, 0, 1, 1, 1), false);
      TestConv(form + "1x1 s1 slices" + th,
               CP(3, 17, 20, 20, 9, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1), false);
      TestConv(form + "1x1 s3" + th,
               CP(2, 5, 31, 29, 7, 1, 1, 3, 3, 0, 0, 0, 0, 1, 1, 1), t == 1);
      TestConv(form + "1x1 pads" + th,
               CP(3, 6, 9, 9, 5, 1, 1, 2, 2, 1, 1, 1, 1, 1, 1, 1), false);
      TestConv(form + "1x1 s2 odd width" + th,
               CP(2, 8, 31, 31, 10, 1, 1, 2, 2, 0, 0, 0, 0, 1, 1, 1), false);
      TestConv(form + "5x5 k blocks" + th,
               CP(20, 20, 12, 12, 50, 5, 5, 1, 1, 0, 0, 0, 0, 1, 1, 1), false);
      TestConv(form + "3x3 s2 many rows" + th,
               CP(2, 16, 17, 17, 260, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1), false);
      TestConv(form + "groups" + th,
               CP(3, 6, 19, 25, 9, 3, 5, 2, 1, 2, 1, 0, 2, 1, 1, 3), false);
    }
  }
  SetNtBroadcastMode(PathMode::kAuto);
  for (int t : {1, 2}) {
    omp_set_num_threads(t);
    TestConv("auto dw 1x1 s2 long (" + std::to_string(t) + " threads)",
             CP(9, 24, 32, 32, 40, 1, 1, 2, 2, 0, 0, 0, 0, 1, 1, 1), false);
  }
  omp_set_num_threads(saved);
  SetWinogradMode(WinogradMode::kAuto);
  SetShiftMode(ShiftMode::kAuto);
}

static void TestConvAll() {
  TestConv("conv basic", CP(2, 3, 7, 9, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1),
           true);
  TestConv("conv stride2 odd",
           CP(3, 4, 11, 10, 6, 3, 5, 2, 2, 1, 2, 1, 2, 1, 1, 1), true);
  TestConv("conv dilation2",
           CP(2, 3, 13, 12, 5, 3, 3, 1, 2, 2, 2, 2, 2, 2, 2, 1), true);
  TestConv("conv groups2", CP(2, 4, 8, 9, 6, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 2),
           true);
  TestConv("conv depthwise",
           CP(2, 6, 9, 9, 6, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 6), true);
  TestConv("conv depthwise x2",
           CP(1, 3, 7, 8, 6, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 3), true);
  TestConv("conv asym pads",
           CP(2, 3, 8, 7, 4, 4, 4, 2, 2, 1, 2, 2, 1, 1, 1, 1), true);
  TestConv("conv pointwise",
           CP(3, 8, 5, 6, 5, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1), true);
  TestConv("conv pointwise groups2",
           CP(2, 8, 5, 3, 6, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 2), true);
  TestConv("conv 1x1 stride2",
           CP(2, 4, 7, 7, 3, 1, 1, 2, 2, 0, 0, 0, 0, 1, 1, 1), true);
  TestConv("conv kernel>input",
           CP(2, 2, 3, 4, 3, 5, 5, 1, 1, 2, 2, 2, 2, 1, 1, 1), true);
  TestConv("conv 1-D", CP(3, 2, 1, 17, 4, 1, 3, 1, 2, 0, 1, 0, 1, 1, 2, 1),
           true);
  // Data gradients of many channels on few pixels run as a forward pass of
  // dy with the flipped, channel-swapped kernel (conv_few.h): 3x3 and 5x5,
  // symmetric and uneven pads, 1 and 2 threads.
  for (int t : {1, 2}) {
    const int saved = omp_get_max_threads();
    omp_set_num_threads(t);
    const std::string th = " (" + std::to_string(t) + " threads)";
    TestConv("conv dx as forward 3x3" + th,
             CP(1, 64, 4, 4, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1), false);
    TestConv("conv dx as forward uneven pads" + th,
             CP(2, 64, 5, 6, 80, 3, 3, 1, 1, 0, 1, 2, 1, 1, 1, 1), false);
    TestConv("conv dx as forward 5x5" + th,
             CP(1, 70, 6, 5, 72, 5, 5, 1, 1, 2, 1, 4, 3, 1, 1, 1), false);
    // Weight gradients over at most 64 output pixels of the batch take one
    // small GEMM (conv_few.h), split by column panels (many taps) or by
    // rows (few): stride 2 with padding, dilation, 1x1.
    TestConv("conv dw few pixels stride2" + th,
             CP(1, 64, 8, 8, 96, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1), false);
    TestConv("conv dw few pixels rows" + th,
             CP(2, 2, 6, 7, 40, 2, 2, 2, 2, 0, 1, 0, 0, 1, 1, 1), true);
    TestConv("conv dw few pixels dilated" + th,
             CP(3, 5, 7, 6, 9, 3, 2, 1, 2, 1, 0, 2, 1, 2, 2, 1), true);
    TestConv("conv dw few pixels 1x1" + th,
             CP(1, 40, 4, 4, 48, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1), false);
    omp_set_num_threads(saved);
  }
  // Large enough per image that the batch is split into chunks of several
  // images plus a one-image remainder.
  TestConv("conv chunked",
           CP(4, 16, 64, 64, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1), false);
  // A single image larger than the column budget is split into row bands.
  TestConv("conv row-tiled",
           CP(2, 8, 203, 190, 4, 3, 3, 1, 1, 1, 2, 2, 1, 1, 1, 1), false);
  TestConv("conv row-tiled strided",
           CP(1, 24, 161, 150, 6, 5, 5, 2, 2, 2, 2, 2, 2, 1, 1, 2), false);
  // Small outputs over long reductions take the threaded dot-product path
  // for the weight gradient, including tails of the 4x4 register tile.
  TestConv("conv depthwise long",
           CP(8, 6, 24, 24, 6, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 6), false);
  TestConv("conv groups long",
           CP(5, 4, 32, 33, 6, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 2), false);
  TestConv("conv lenet1", CP(16, 1, 28, 28, 20, 5, 5, 1, 1, 0, 0, 0, 0, 1, 1, 1),
           false);
  TestConv("conv lenet2",
           CP(16, 20, 12, 12, 50, 5, 5, 1, 1, 0, 0, 0, 0, 1, 1, 1), false);
  TestEngineCases();
  TestWinogradWeight();
  TestTapsDx();
  TestShiftCases();
  TestNtForms();
  TestWinogradCases();
  TestWinogradCache();
  TestWeightCacheRules();
  TestWeightPanels();

  Vec buf(4096);
  const float* f = buf.data();
  float* o = buf.data();
  auto bad = [&](ConvParams p) {
    return Throws([&] { Conv2dForward(f, f, nullptr, o, p); });
  };
  Report(bad(CP(1, 3, 5, 5, 4, 3, 3, 1, 1, 0, 0, 0, 0, 1, 1, 2)),
         "conv rejects groups not dividing c");
  Report(bad(CP(1, 4, 5, 5, 3, 3, 3, 1, 1, 0, 0, 0, 0, 1, 1, 2)),
         "conv rejects groups not dividing oc");
  Report(bad(CP(0, 3, 5, 5, 4, 3, 3, 1, 1, 0, 0, 0, 0, 1, 1, 1)),
         "conv rejects zero batch");
  Report(bad(CP(1, 3, 5, 5, 4, 3, 3, 0, 1, 0, 0, 0, 0, 1, 1, 1)),
         "conv rejects zero stride");
  Report(bad(CP(1, 3, 2, 5, 4, 3, 3, 1, 1, 0, 0, 0, 0, 1, 1, 1)),
         "conv rejects empty output");
  Report(bad(CP(1, 3, 5, 5, 4, 3, 3, 1, 1, -1, 0, 0, 0, 1, 1, 1)),
         "conv rejects negative pad");
  Report(Throws([&] {
           Im2Col(f, 1, 2, 2, 3, 3, 0, 0, 0, 0, 1, 1, 1, 1, o);
         }),
         "Im2Col rejects empty output");
}

// ----------------------------------------------------------------- pool refs

static void RefMaxPool(const DVec& x, const PoolParams& p, DVec* y,
                       std::vector<int32_t>* arg) {
  const int oh = p.oh(), ow = p.ow();
  y->assign(size_t(p.n) * p.c * oh * ow, 0.0);
  arg->assign(y->size(), -1);
  for (int q = 0; q < p.n * p.c; ++q)
    for (int oy = 0; oy < oh; ++oy)
      for (int ox = 0; ox < ow; ++ox) {
        double best = -INFINITY;
        int32_t at = -1;
        for (int ki = 0; ki < p.kh; ++ki)
          for (int kj = 0; kj < p.kw; ++kj) {
            const int iy = oy * p.sh - p.pad_t + ki * p.dh;
            const int ix = ox * p.sw - p.pad_l + kj * p.dw;
            if (iy < 0 || iy >= p.h || ix < 0 || ix >= p.w) continue;
            const double v = x[(size_t(q) * p.h + iy) * p.w + ix];
            if (v > best || std::isnan(v)) {
              best = v;
              at = iy * p.w + ix;
            }
          }
        const size_t o = (size_t(q) * oh + oy) * ow + ox;
        (*y)[o] = best;
        (*arg)[o] = at;
      }
}

// Divisor counted cell by cell, straight from the PyTorch/ONNX definition.
static int RefAvgDivisor(const PoolParams& p, int oy, int ox) {
  int cnt = 0;
  for (int ki = 0; ki < p.kh; ++ki)
    for (int kj = 0; kj < p.kw; ++kj) {
      const int iy = oy * p.sh - p.pad_t + ki * p.dh;
      const int ix = ox * p.sw - p.pad_l + kj * p.dw;
      const bool in_img = iy >= 0 && iy < p.h && ix >= 0 && ix < p.w;
      const bool in_pad = iy >= -p.pad_t && iy < p.h + p.pad_b &&
                          ix >= -p.pad_l && ix < p.w + p.pad_r;
      cnt += p.count_include_pad ? in_pad : in_img;
    }
  return cnt;
}

static DVec RefAvgPool(const DVec& x, const PoolParams& p) {
  const int oh = p.oh(), ow = p.ow();
  DVec y(size_t(p.n) * p.c * oh * ow, 0.0);
  for (int q = 0; q < p.n * p.c; ++q)
    for (int oy = 0; oy < oh; ++oy)
      for (int ox = 0; ox < ow; ++ox) {
        double s = 0;
        for (int ki = 0; ki < p.kh; ++ki)
          for (int kj = 0; kj < p.kw; ++kj) {
            const int iy = oy * p.sh - p.pad_t + ki * p.dh;
            const int ix = ox * p.sw - p.pad_l + kj * p.dw;
            if (iy < 0 || iy >= p.h || ix < 0 || ix >= p.w) continue;
            s += x[(size_t(q) * p.h + iy) * p.w + ix];
          }
        const int d = RefAvgDivisor(p, oy, ox);
        y[(size_t(q) * oh + oy) * ow + ox] = d > 0 ? s / d : 0.0;
      }
  return y;
}

static PoolParams PP(int n, int c, int h, int w, int kh, int kw, int sh,
                     int sw, int pt, int pl, int pb, int pr, int dh, int dw,
                     bool ceil, bool cip) {
  return PoolParams{n, c, h, w, kh, kw, sh, sw, pt, pl, pb, pr,
                    dh, dw, ceil, cip};
}

static void TestPool(const std::string& name, const PoolParams& p,
                     const Vec& x, bool fd) {
  const size_t ysz = size_t(p.n) * p.c * p.oh() * p.ow();
  const DVec xd = D(x);
  Vec y(ysz), dy = Random(ysz), dx(x.size(), 3.f);
  std::vector<int32_t> arg(ysz), rarg;
  DVec ry;
  RefMaxPool(xd, p, &ry, &rarg);
  MaxPool2dForward(x.data(), y.data(), arg.data(), p);
  Check(name + " max forward", y, ry, 0);
  Report(arg == rarg, name + " max argmax");
  Vec y2(ysz);
  MaxPool2dForward(x.data(), y2.data(), nullptr, p);
  Report(y2 == y || RelErr(y2.data(), ry.data(), ysz) == 0,
         name + " max forward without argmax");
  MaxPool2dBackward(dy.data(), arg.data(), dx.data(), p);
  DVec rdx(x.size(), 0.0);
  for (size_t j = 0; j < ysz; ++j)
    if (rarg[j] >= 0) {
      const size_t plane = j / (size_t(p.oh()) * p.ow());
      rdx[plane * p.h * p.w + rarg[j]] += dy[j];
    }
  Check(name + " max backward", dx, rdx);
  const DVec dyd = D(dy);
  if (fd)
    CheckFD(name + " max dx", x,
            [&](const DVec& v) {
              DVec yy;
              std::vector<int32_t> aa;
              RefMaxPool(v, p, &yy, &aa);
              return Dot(yy, dyd);
            },
            dx, 64, 1e-4);

  for (bool cip : {false, true}) {
    PoolParams q = p;
    q.count_include_pad = cip;
    const std::string tag = name + (cip ? " avg(incl pad)" : " avg(excl pad)");
    Vec ay(ysz), adx(x.size(), 3.f);
    AvgPool2dForward(x.data(), ay.data(), q);
    Check(tag + " forward", ay, RefAvgPool(xd, q));
    AvgPool2dBackward(dy.data(), adx.data(), q);
    DVec radx(x.size(), 0.0);
    const int oh = q.oh(), ow = q.ow();
    for (int pl = 0; pl < q.n * q.c; ++pl)
      for (int oy = 0; oy < oh; ++oy)
        for (int ox = 0; ox < ow; ++ox) {
          const int d = RefAvgDivisor(q, oy, ox);
          if (d == 0) continue;
          const double g = dy[(size_t(pl) * oh + oy) * ow + ox] / d;
          for (int ki = 0; ki < q.kh; ++ki)
            for (int kj = 0; kj < q.kw; ++kj) {
              const int iy = oy * q.sh - q.pad_t + ki * q.dh;
              const int ix = ox * q.sw - q.pad_l + kj * q.dw;
              if (iy < 0 || iy >= q.h || ix < 0 || ix >= q.w) continue;
              radx[(size_t(pl) * q.h + iy) * q.w + ix] += g;
            }
        }
    Check(tag + " backward", adx, radx);
    if (fd)
      CheckFD(tag + " dx", x,
              [&](const DVec& v) { return Dot(RefAvgPool(v, q), dyd); }, adx);
  }
}

// Values spaced 1/64 apart, shuffled: no ties, so finite differences never
// straddle a change of the max winner.
static Vec Distinct(size_t n) {
  Vec v(n);
  for (size_t i = 0; i < n; ++i) v[i] = float(i) / 64.f;
  for (size_t i = n; i > 1; --i) {
    const size_t j = size_t((Uniform() * 0.5f + 0.5f) * (i - 1) + 0.5f);
    std::swap(v[i - 1], v[j]);
  }
  return v;
}

// The 2x2 stride-2 max-pool loops: rows of 3, 4, 5, 12, 13, 20 and 21
// outputs (every block width, rows of 4 paired with the next row's, and
// scalar tails), planes without an uncovered last row whose rows are
// whole half blocks (the flat walk, at every block width) and near misses,
// odd plane heights and widths (a last row or column no
// window covers, which the backward must zero), ceil mode on even sizes
// (fast) and odd ones (general), padding (general), integer-valued inputs
// (ties), NaN (the fast pass redoes those planes exactly) and all -inf
// windows, at 1 and 3 threads (planes split unevenly, so a thread's rows
// start at odd plane boundaries).
static void TestPool2x2Fast() {
  const int saved = omp_get_max_threads();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (int t : {1, 3}) {
    omp_set_num_threads(t);
    const std::string th = " (" + std::to_string(t) + " threads)";
    struct Case { int n, c, h, w, pad; bool ceil; };
    const Case cases[] = {{2, 3, 8, 8, 0, 0},   {1, 5, 6, 8, 0, 0},
                          {2, 3, 9, 9, 0, 0},   {3, 3, 7, 24, 0, 0},
                          {1, 4, 10, 25, 0, 0}, {2, 3, 5, 6, 0, 0},
                          {2, 2, 6, 10, 0, 0},  {1, 3, 6, 26, 0, 0},
                          {1, 3, 4, 40, 0, 0},  {1, 3, 5, 43, 0, 0},
                          {2, 3, 8, 8, 0, 1},   {2, 3, 9, 11, 0, 1},
                          {2, 3, 8, 8, 1, 0},   {3, 7, 2, 8, 0, 0},
                          {1, 5, 4, 8, 0, 0},   {2, 3, 12, 8, 0, 0},
                          {2, 3, 9, 8, 0, 0},   {2, 3, 8, 9, 0, 0},
                          // The flat walk: rows of 2, 4, 6, 8, 12, 16 and
                          // 24 outputs, odd plane widths (a last column no
                          // window covers), odd and even row counts (blocks
                          // across rows and planes, an odd last half).
                          {3, 5, 6, 24, 0, 0},  {1, 3, 10, 25, 0, 0},
                          {2, 3, 6, 16, 0, 0},  {1, 3, 10, 17, 0, 0},
                          {2, 3, 4, 48, 0, 0},  {3, 3, 2, 32, 0, 0},
                          {1, 3, 6, 4, 0, 0},   {1, 5, 2, 5, 0, 0},
                          {2, 3, 14, 12, 0, 0}, {1, 7, 6, 13, 0, 0},
                          {3, 1, 2, 8, 0, 0},
                          // Row pairs with precomputed block offsets
                          // (even row counts), one with an odd width, and
                          // rows too long for them (136 wide).
                          {2, 3, 8, 25, 0, 0},  {3, 2, 12, 24, 0, 0},
                          {1, 2, 4, 136, 0, 0},
                          // Whole rows to a vector block (AVX-512): rows
                          // of 1, 2, 4, 8 and 16 outputs.
                          {2, 2, 32, 2, 0, 0},  {1, 3, 16, 4, 0, 0},
                          {3, 2, 8, 8, 0, 0},   {2, 3, 16, 16, 0, 0},
                          {3, 2, 4, 32, 0, 0}};
    for (const Case& k : cases) {
      PoolParams p = PP(k.n, k.c, k.h, k.w, 2, 2, 2, 2, k.pad, k.pad, k.pad,
                        k.pad, 1, 1, k.ceil, 0);
      const size_t n = size_t(k.n) * k.c * k.h * k.w;
      const std::string name = "pool 2x2 " + std::to_string(k.h) + "x" +
                               std::to_string(k.w) + (k.ceil ? " ceil" : "") +
                               (k.pad ? " pad" : "") + th;
      TestPool(name, p, Random(n), false);
      Vec ties = Random(n);
      for (auto& v : ties) v = std::floor(v * 1.5f);
      TestPool(name + " ties", p, ties, false);
      Vec odd = Random(n);
      odd[n / 3] = nan;
      odd[n / 3 + 1] = nan;
      odd[n - 1] = nan;
      for (size_t i = n / 2; i < n / 2 + 9 && i < n; ++i) odd[i] = -INFINITY;
      odd[n / 5] = INFINITY;
      TestPool(name + " nan/inf", p, odd, false);
      // One whole window of -inf (argmax -1) in the middle plane, with no
      // NaN anywhere, and one holding -inf and finite values.
      Vec inf = Random(n);
      const int oy = p.oh() / 2, ox = p.ow() / 2;
      const size_t plane = size_t(k.n * k.c / 2) * k.h * k.w;
      for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 2; ++j) {
          const int iy = 2 * oy - k.pad + i, ix = 2 * ox - k.pad + j;
          if (iy >= 0 && iy < k.h && ix >= 0 && ix < k.w)
            inf[plane + size_t(iy) * k.w + ix] = -INFINITY;
        }
      inf[n / 7] = -INFINITY;
      TestPool(name + " -inf window", p, inf, false);
    }
  }
  omp_set_num_threads(saved);
  // An argmax the forward did not make (cells of other windows, -1, and a
  // cell no window covers) goes through the general scatter-add; on 8x8 and
  // 16x16 maps, from the loop that spreads whole rows.
  for (int t : {1, 2}) {
    omp_set_num_threads(t);
    for (int hw : {7, 8, 16}) {
      const int w = hw == 7 ? 9 : hw;
      PoolParams p = PP(2, 3, hw, w, 2, 2, 2, 2, 0, 0, 0, 0, 1, 1, 0, 0);
      const int oh = p.oh(), ow = p.ow(), plane = p.h * p.w;
      const size_t ysz = size_t(p.n) * p.c * oh * ow;
      Vec x = Random(size_t(p.n) * p.c * plane), y(ysz), dy = Random(ysz);
      std::vector<int32_t> arg(ysz);
      MaxPool2dForward(x.data(), y.data(), arg.data(), p);
      for (int rule = 0; rule < 3; ++rule) {
        std::vector<int32_t> a = arg;
        if (rule == 0) a[ysz / 2 + 5] = 0;      // another window's cell
        if (rule == 1) a[ysz - 1] = plane - 1;  // 7x9: the uncovered corner
        if (rule == 2) a[7] = a[8] = -1;        // no input
        Vec dx(x.size(), 5.f);
        MaxPool2dBackward(dy.data(), a.data(), dx.data(), p);
        // Summed in float: a cell gets at most two gradients, whose float sum
        // does not depend on their order, so the result must match exactly.
        Vec sums(x.size(), 0.f);
        for (size_t j = 0; j < ysz; ++j)
          if (a[j] >= 0) sums[j / (oh * ow) * plane + a[j]] += dy[j];
        const DVec ref(sums.begin(), sums.end());
        Check("pool 2x2 backward foreign argmax " + std::to_string(rule) + " " +
                  std::to_string(p.h) + "x" + std::to_string(p.w) + " (" +
                  std::to_string(t) + " threads)",
              dx, ref, 0);
      }
    }
  }
  omp_set_num_threads(saved);
}

// MaxPool2dBackward's count of argmax entries at or past the plane's end,
// which its caller reports as an error: 2x2 pools (whose loops find them
// while checking each argmax against its window) and a 3x3 one, over 1 and
// 2 threads, with such entries in the first, a middle and the last plane;
// the other entries are still scattered, and -1 is skipped uncounted.
static void TestArgmaxPastPlane() {
  const int saved = omp_get_max_threads();
  bool ok = true;
  const PoolParams cases[] = {PP(64, 50, 8, 8, 2, 2, 2, 2, 0, 0, 0, 0, 1, 1, 0, 0),
                              PP(2, 3, 12, 24, 2, 2, 2, 2, 0, 0, 0, 0, 1, 1, 0, 0),
                              PP(2, 3, 7, 7, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 0, 0)};
  for (int t : {1, 2}) {
    omp_set_num_threads(t);
    for (const PoolParams& p : cases) {
      const int oh = p.oh(), ow = p.ow(), plane = p.h * p.w;
      const size_t ysz = size_t(p.n) * p.c * oh * ow;
      Vec x = Random(size_t(p.n) * p.c * plane), y(ysz), dy = Random(ysz);
      std::vector<int32_t> arg(ysz);
      MaxPool2dForward(x.data(), y.data(), arg.data(), p);
      Vec dx(x.size());
      ok = ok && MaxPool2dBackward(dy.data(), arg.data(), dx.data(), p) == 0;
      std::vector<int32_t> a = arg;
      a[0] = plane;
      a[ysz / 2] = 1 << 30;
      a[ysz / 2 + 1] = -1;
      a[ysz - 1] = plane + 1;
      const size_t past = MaxPool2dBackward(dy.data(), a.data(), dx.data(), p);
      Vec ref(x.size(), 0.f);
      for (size_t j = 0; j < ysz; ++j)
        if (a[j] >= 0 && a[j] < plane) ref[j / (oh * ow) * plane + a[j]] += dy[j];
      ok = ok && past == 3;
      Check("pool backward, argmax past the plane (" + std::to_string(p.kh) + "x" +
                std::to_string(p.kw) + ", " + std::to_string(t) + " threads)",
            dx, DVec(ref.begin(), ref.end()), 0);
    }
  }
  omp_set_num_threads(saved);
  Report(ok, "max pool backward counts argmax entries past the plane");
}

static void TestPoolAll() {
  struct Case { const char* name; PoolParams p; bool fd; };
  const Case cases[] = {
      {"pool 3x3 s2 p1", PP(2, 3, 7, 7, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 0, 0), 1},
      {"pool 3x3 s2 p1 ceil", PP(2, 3, 6, 6, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1, 0),
       1},
      {"pool 2x2 s2 ceil odd", PP(2, 2, 9, 7, 2, 2, 2, 2, 0, 0, 0, 0, 1, 1, 1, 0),
       1},
      {"pool 2x2 s2", PP(2, 2, 8, 9, 2, 2, 2, 2, 0, 0, 0, 0, 1, 1, 0, 0), 1},
      {"pool asym", PP(1, 2, 7, 6, 3, 2, 2, 3, 0, 1, 2, 0, 1, 1, 0, 0), 1},
      {"pool asym ceil", PP(1, 2, 7, 6, 3, 2, 2, 3, 0, 1, 2, 0, 1, 1, 1, 0), 1},
      {"pool dil2", PP(2, 2, 10, 9, 3, 3, 1, 2, 1, 1, 1, 1, 2, 2, 0, 0), 1},
      {"pool dil2 ceil", PP(2, 2, 10, 9, 3, 3, 2, 2, 1, 1, 1, 1, 2, 2, 1, 0), 1},
      {"pool 1-D ceil", PP(2, 3, 1, 11, 1, 3, 1, 2, 0, 1, 0, 1, 1, 1, 1, 0), 1},
      {"pool all-pad windows", PP(1, 2, 3, 3, 2, 2, 1, 1, 2, 2, 2, 2, 1, 1, 0, 0),
       0},
      {"pool lenet", PP(64, 20, 24, 24, 2, 2, 2, 2, 0, 0, 0, 0, 1, 1, 0, 0), 0},
  };
  for (const Case& c : cases) {
    const size_t n = size_t(c.p.n) * c.p.c * c.p.h * c.p.w;
    TestPool(c.name, c.p, c.fd ? Distinct(n) : Random(n), c.fd);
  }
  // Integer-valued input produces ties: the first maximum in scan order wins.
  {
    PoolParams p = PP(2, 2, 7, 8, 3, 3, 1, 2, 1, 1, 1, 1, 1, 1, 1, 0);
    Vec x = Random(size_t(2) * 2 * 7 * 8);
    for (auto& v : x) v = std::floor(v * 1.5f);
    TestPool("pool ties", p, x, false);
  }
  // The vector loop of 2x2 stride-2 max pooling: rows of 35 outputs (whole
  // vectors and a tail at every width), ties, NaN and -inf.
  {
    PoolParams p = PP(2, 3, 6, 71, 2, 2, 2, 2, 0, 0, 0, 0, 1, 1, 0, 0);
    Vec x = Random(size_t(2) * 3 * 6 * 71);
    for (auto& v : x) v = std::floor(v * 2.f);
    x[5] = x[77] = std::numeric_limits<float>::quiet_NaN();
    for (int i = 150; i < 160; ++i) x[i] = -INFINITY;
    x[71 + 150] = x[71 + 151] = -INFINITY;
    TestPool("pool 2x2 s2 vector ties", p, x, false);
  }
  TestPool2x2Fast();
  TestArgmaxPastPlane();
  {
    PoolParams p = PP(1, 1, 4, 4, 2, 2, 2, 2, 0, 0, 0, 0, 1, 1, 0, 0);
    Vec x = Random(16), y(4);
    x[5] = std::numeric_limits<float>::quiet_NaN();
    MaxPool2dForward(x.data(), y.data(), nullptr, p);
    Report(std::isnan(y[0]) && !std::isnan(y[1]) && !std::isnan(y[3]),
           "max pool propagates NaN");
  }
  // Output sizes and averages worked out by hand from PyTorch's rules.
  Report(PP(1, 1, 1, 6, 1, 3, 1, 2, 0, 0, 0, 0, 1, 1, 1, 0).ow() == 3 &&
             PP(1, 1, 1, 6, 1, 3, 1, 2, 0, 0, 0, 0, 1, 1, 0, 0).ow() == 2 &&
             PP(1, 1, 1, 5, 1, 2, 1, 2, 0, 1, 0, 1, 1, 1, 1, 0).ow() == 3,
         "pool output size with ceil_mode");
  {
    Vec x = {1, 2, 3, 4, 5}, y(3);
    AvgPool2dForward(x.data(), y.data(),
                     PP(1, 1, 1, 5, 1, 2, 1, 2, 0, 0, 0, 0, 1, 1, 1, 1));
    Report(y == Vec({1.5f, 3.5f, 5.f}), "avg pool ceil partial window");
    Vec x6 = {1, 2, 3, 4, 5, 6}, yi(4), ye(4);
    AvgPool2dForward(x6.data(), yi.data(),
                     PP(1, 1, 1, 6, 1, 3, 1, 2, 0, 1, 0, 1, 1, 1, 1, 1));
    AvgPool2dForward(x6.data(), ye.data(),
                     PP(1, 1, 1, 6, 1, 3, 1, 2, 0, 1, 0, 1, 1, 1, 1, 0));
    Report(yi == Vec({1.f, 3.f, 5.f, 3.f}) && ye == Vec({1.5f, 3.f, 5.f, 6.f}),
           "avg pool ceil + pad divisors");
  }
  Vec buf(64);
  Report(Throws([&] {
           MaxPool2dForward(buf.data(), buf.data(), nullptr,
                            PP(1, 1, 2, 2, 3, 3, 1, 1, 0, 0, 0, 0, 1, 1, 0, 0));
         }),
         "pool rejects empty output");
  Report(Throws([&] {
           AvgPool2dForward(buf.data(), buf.data(),
                            PP(1, 0, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 0, 0));
         }),
         "pool rejects zero channels");
  Report(Throws([&] {
           MaxPool2dBackward(buf.data(), nullptr, buf.data(),
                             PP(1, 1, 4, 4, 2, 2, 2, 2, 0, 0, 0, 0, 1, 1, 0, 0));
         }),
         "max pool backward rejects missing argmax");
}

// ----------------------------------------------------------- batchnorm refs

static DVec RefBN(const DVec& x, const DVec& s, const DVec& b, int n, int c,
                  int hw, double eps, DVec* mean, DVec* var) {
  DVec y(x.size());
  mean->assign(c, 0.0);
  var->assign(c, 0.0);
  const double cnt = double(n) * hw;
  for (int ch = 0; ch < c; ++ch) {
    double m = 0, v = 0;
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < hw; ++j) m += x[(size_t(i) * c + ch) * hw + j];
    m /= cnt;
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < hw; ++j) {
        const double d = x[(size_t(i) * c + ch) * hw + j] - m;
        v += d * d;
      }
    v /= cnt;
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < hw; ++j) {
        const size_t k = (size_t(i) * c + ch) * hw + j;
        y[k] = (x[k] - m) / std::sqrt(v + eps) * s[ch] + b[ch];
      }
    (*mean)[ch] = m;
    (*var)[ch] = v;
  }
  return y;
}

static void TestBatchNorm(int n, int c, int hw, float offset, bool fd) {
  const std::string name = "batchnorm " + std::to_string(n) + "x" +
                           std::to_string(c) + "x" + std::to_string(hw);
  const float eps = 1e-5f;
  Vec x = Random(size_t(n) * c * hw), s = Random(c), b = Random(c);
  for (auto& v : x) v = v * 2.f + offset;
  Vec y(x.size()), mean(c), var(c), dy = Random(x.size());
  BatchNormForwardTraining(x.data(), s.data(), b.data(), y.data(), mean.data(),
                           var.data(), n, c, hw, eps);
  const DVec xd = D(x), sd = D(s), bd = D(b), dyd = D(dy);
  DVec rm, rv;
  const DVec ry = RefBN(xd, sd, bd, n, c, hw, eps, &rm, &rv);
  Check(name + " train forward", y, ry, 5e-5);
  Check(name + " batch mean", mean, rm);
  Check(name + " batch var", var, rv, 5e-5);

  Vec rmean = Random(c), rvar = Random(c), yi(x.size());
  for (auto& v : rvar) v = v * v + 0.5f;
  BatchNormForwardInference(x.data(), s.data(), b.data(), rmean.data(),
                            rvar.data(), yi.data(), n, c, hw, eps);
  DVec ryi(x.size());
  for (size_t k = 0; k < x.size(); ++k) {
    const int ch = int((k / hw) % c);
    ryi[k] = (xd[k] - rmean[ch]) / std::sqrt(double(rvar[ch]) + eps) * sd[ch] +
             bd[ch];
  }
  Check(name + " inference forward", yi, ryi);

  Vec dx(x.size()), ds(c), dbias(c);
  BatchNormBackward(x.data(), dy.data(), s.data(), mean.data(), var.data(),
                    dx.data(), ds.data(), dbias.data(), n, c, hw, eps);
  // Analytic reference: dx = g/sigma * (dy - mean(dy) - xhat*mean(dy*xhat)).
  DVec rdx(x.size()), rds(c, 0.0), rdb(c, 0.0);
  const double cnt = double(n) * hw;
  for (int ch = 0; ch < c; ++ch) {
    const double inv = 1.0 / std::sqrt(rv[ch] + eps);
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < hw; ++j) {
        const size_t k = (size_t(i) * c + ch) * hw + j;
        rdb[ch] += dyd[k];
        rds[ch] += dyd[k] * (xd[k] - rm[ch]) * inv;
      }
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < hw; ++j) {
        const size_t k = (size_t(i) * c + ch) * hw + j;
        const double xh = (xd[k] - rm[ch]) * inv;
        rdx[k] = sd[ch] * inv * (dyd[k] - rdb[ch] / cnt - xh * rds[ch] / cnt);
      }
  }
  Check(name + " backward dx", dx, rdx, 1e-4);
  Check(name + " backward dscale", ds, rds, 5e-5);
  Check(name + " backward dbias", dbias, rdb);
  if (!fd) return;
  DVec m, v;
  CheckFD(name + " dx", x,
          [&](const DVec& t) {
            return Dot(RefBN(t, sd, bd, n, c, hw, eps, &m, &v), dyd);
          },
          dx, 64, 1e-4, 2e-4);
  CheckFD(name + " dscale", s,
          [&](const DVec& t) {
            return Dot(RefBN(xd, t, bd, n, c, hw, eps, &m, &v), dyd);
          },
          ds, 64, 1e-4, 2e-4);
  CheckFD(name + " dbias", b,
          [&](const DVec& t) {
            return Dot(RefBN(xd, sd, t, n, c, hw, eps, &m, &v), dyd);
          },
          dbias, 64, 1e-4, 2e-4);
}

static void TestBatchNormAll() {
  TestBatchNorm(3, 4, 5, 0.f, true);
  TestBatchNorm(2, 3, 49, 0.f, true);
  TestBatchNorm(5, 2, 1, 0.f, true);
  TestBatchNorm(16, 20, 144, 0.f, false);
  TestBatchNorm(8, 3, 100, 100.f, false);  // large mean, small spread
  // The statistics pass sums a few samples per call (fewer for long planes)
  // and threads take blocks of channels; the writing pass splits the
  // (sample, channel) planes evenly, so a share may start mid-batch at any
  // channel: batches that are no multiple of the group, planes with vector
  // tails, channel and plane counts that leave the last thread a short
  // share, large means, and 1 to 3 threads. 3x4x8192 on 2 and 3 threads
  // has blocks of two channels whose runs are exactly 64 KiB: the forward
  // writes in memory order there and the backward by blocks.
  const int saved = omp_get_max_threads();
  for (int t : {1, 2, 3}) {
    omp_set_num_threads(t);
    TestBatchNorm(7, 5, 67, 0.f, false);
    TestBatchNorm(13, 41, 64, -30.f, false);
    TestBatchNorm(9, 7, 1031, 50.f, false);
    TestBatchNorm(6, 11, 3000, 1000.f, false);
    TestBatchNorm(3, 4, 8192, 7.f, false);
    TestBatchNorm(5, 3, 7, 0.f, true);
  }
  // Non-temporal dx stores: rows that start off the vector alignment
  // (planes of 7, 67 and 1031 values), one-value planes and vector tails.
  SetBnStreamMode(BnStreamMode::kForce);
  for (int t : {1, 2}) {
    omp_set_num_threads(t);
    TestBatchNorm(7, 5, 67, 0.f, false);
    TestBatchNorm(9, 7, 1031, 50.f, false);
    TestBatchNorm(5, 2, 1, 0.f, false);
    TestBatchNorm(4, 6, 64, 0.f, false);
    TestBatchNorm(5, 3, 7, 0.f, true);
  }
  SetBnStreamMode(BnStreamMode::kAuto);
  omp_set_num_threads(saved);
  Vec buf(8);
  Report(Throws([&] {
           BatchNormForwardInference(buf.data(), buf.data(), buf.data(),
                                     buf.data(), buf.data(), buf.data(), 1, 0,
                                     4, 1e-5f);
         }),
         "batchnorm rejects zero channels");
}

// ------------------------------------------------------------------ timing

// Best time per call over several rounds of repeated calls. The rounds are
// interleaved across the timed functions, so a burst of load from another
// process on this small machine spoils a round rather than a whole figure.
static std::vector<double> BestMs(
    const std::vector<std::function<void()>>& fns, int rounds, int reps) {
  std::vector<double> best(fns.size(), 1e30);
  for (auto& f : fns) f();
  for (int r = 0; r < rounds; ++r)
    for (size_t k = 0; k < fns.size(); ++k)
      for (int i = 0; i < reps; ++i) {
        const auto a = std::chrono::steady_clock::now();
        fns[k]();
        const auto b = std::chrono::steady_clock::now();
        best[k] = std::min(
            best[k], std::chrono::duration<double, std::milli>(b - a).count());
      }
  return best;
}

static void Time(const char* name, const ConvParams& p) {
  const size_t ysz = size_t(p.n) * p.oc * p.oh() * p.ow();
  Vec x = Random(size_t(p.n) * p.c * p.h * p.w);
  Vec w = Random(size_t(p.oc) * (p.c / p.groups) * p.kh * p.kw);
  Vec b = Random(p.oc), y(ysz), dy = Random(ysz), dx(x.size()), dw(w.size()),
      db(p.oc);
  const std::vector<double> t = BestMs(
      {[&] { Conv2dForward(x.data(), w.data(), b.data(), y.data(), p); },
       [&] { Conv2dBackwardData(dy.data(), w.data(), dx.data(), p); },
       [&] { Conv2dBackwardWeight(x.data(), dy.data(), dw.data(), p); },
       [&] { Conv2dBackwardBias(dy.data(), db.data(), p); }},
      10, 3);
  const double gflop = 2.0 * ysz * (p.c / p.groups) * p.kh * p.kw * 1e-9;
  std::printf(
      "timing %s: fwd %.3f ms (%.1f GFLOP/s), bwd data %.3f ms, bwd weight "
      "%.3f ms, bwd bias %.3f ms, fwd+bwd %.3f ms\n",
      name, t[0], gflop / t[0] * 1e3, t[1], t[2], t[3],
      t[0] + t[1] + t[2] + t[3]);
}

int main() {
  TestIm2Col();
  // Every kernel family this build has and this CPU runs, best last so the
  // timings below use it.
  for (Isa isa : {Isa::kBaseline, Isa::kAvx2, Isa::kAvx512}) {
    if (!IsaAvailable(isa)) {
      std::printf("ISA %s: not available here, skipped\n", IsaName(isa));
      continue;
    }
    UseIsa(isa);
    g_isa = IsaName(isa);
    const int before = g_pass;
    TestConvAll();
    TestPoolAll();
    TestBatchNormAll();
    std::printf("ISA %s: %d checks\n", IsaName(isa), g_pass - before);
  }
  Time("conv1 64x1x28x28 -> 20 5x5",
       CP(64, 1, 28, 28, 20, 5, 5, 1, 1, 0, 0, 0, 0, 1, 1, 1));
  Time("conv2 64x20x12x12 -> 50 5x5",
       CP(64, 20, 12, 12, 50, 5, 5, 1, 1, 0, 0, 0, 0, 1, 1, 1));
  std::printf("%d passed, %d failed\n", g_pass, g_fail);
  return g_fail == 0 ? 0 : 1;
}
