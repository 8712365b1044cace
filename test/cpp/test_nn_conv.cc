// Convolution checks of the standalone nn-kernel test: the double
// references and the implicit-GEMM, few-channel, flat-shift and
// weight-gradient forms (the Winograd cases are in test_nn_winograd.cc).
#include "nn_test_util.h"
#include "nn_test_families.h"

// ----------------------------------------------------------------- conv refs

DVec RefConv(const DVec& x, const DVec& w, const DVec& b,
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
void RefConvBackward(const DVec& x, const DVec& w, const DVec& dy,
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

void TestConv(const std::string& name, ConvParams p, bool fd) {
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

void TestIm2Col() {
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

ConvParams CP(int n, int c, int h, int w, int oc, int kh, int kw,
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
    // Stride 1 with dx the size of dy and at least as many output channels
    // (GatherStride1 in conv_dx_cpp.cc): 1x1 kernels take the gather form
    // in every family, 5x5 and larger with equal channels with AVX-512;
    // uneven pads, a 5x7 kernel, groups, and a 3x3 that stays scattered.
    TestConv("conv 1x1 s1 wide gather" + th,
             CP(2, 6, 7, 9, 20, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1), true);
    TestConv("conv 1x1 s1 groups gather" + th,
             CP(3, 10, 5, 6, 30, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 2), false);
    TestConv("conv 5x5 same gather" + th,
             CP(3, 16, 9, 11, 16, 5, 5, 1, 1, 2, 2, 2, 2, 1, 1, 1), true);
    TestConv("conv 5x7 uneven pads gather" + th,
             CP(2, 12, 8, 10, 12, 5, 7, 1, 1, 1, 3, 3, 3, 1, 1, 1), false);
    TestConv("conv 5x5 same groups gather" + th,
             CP(2, 18, 7, 8, 18, 5, 5, 1, 1, 2, 2, 2, 2, 1, 1, 3), false);
    TestConv("conv 3x3 same scatter" + th,
             CP(2, 6, 6, 7, 6, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1), false);
    // Stride 2 in the scatter form with dy rows of more than 8 values,
    // which AddRow adds as spread vectors (conv_pack.h): rows of 19, 16, 20
    // and 9 against every vector width, padded on one side, both or
    // neither, with groups.
    TestConv("conv 3x3 s2 long rows scatter" + th,
             CP(2, 8, 7, 37, 16, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1), true);
    TestConv("conv 5x5 s2 uneven pads scatter" + th,
             CP(2, 6, 9, 33, 12, 5, 5, 2, 2, 2, 1, 1, 2, 1, 1, 1), false);
    TestConv("conv 3x3 s2 unpadded scatter" + th,
             CP(1, 5, 6, 41, 10, 3, 3, 2, 2, 0, 0, 0, 0, 1, 1, 1), false);
    TestConv("conv 3x3 s2 groups scatter" + th,
             CP(2, 12, 5, 18, 24, 3, 3, 2, 2, 1, 0, 1, 1, 1, 1, 2), false);
    // Weight gradients over grids of at most 16 pixels from planes of at
    // most 64 floats, which AVX-512 packs plane by plane in registers
    // (PackSmallPlanes in conv_nt_isa.cc): strides 1 and 2, 3x3 and 5x5
    // kernels, dilation, uneven pads, a non-square plane and groups.
    TestConv("conv dw small planes s2" + th,
             CP(6, 10, 8, 8, 12, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1), true);
    TestConv("conv dw small planes 5x5" + th,
             CP(9, 4, 6, 6, 6, 5, 5, 1, 1, 1, 1, 1, 1, 1, 1, 1), false);
    TestConv("conv dw small planes 5x5 s2" + th,
             CP(12, 5, 6, 6, 8, 5, 5, 2, 2, 2, 2, 2, 2, 1, 1, 1), false);
    TestConv("conv dw small planes dilated" + th,
             CP(8, 6, 8, 8, 7, 3, 3, 2, 2, 2, 2, 2, 2, 2, 2, 1), false);
    TestConv("conv dw small planes uneven" + th,
             CP(10, 6, 5, 8, 9, 3, 3, 2, 2, 1, 0, 0, 1, 1, 1, 1), false);
    TestConv("conv dw small planes groups" + th,
             CP(6, 12, 8, 8, 12, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 3), false);
  }
  omp_set_num_threads(saved);
}

// Rows ending in half a vector, whose last halves the tap-scatter data
// gradient and the flat-shift weight gradient take two rows at a time: 6
// (4-float vectors), 12, 20 and 28 (8-float), 8, 24 and 40 (16-float)
// outputs wide, odd row counts leaving the last half alone, padding, and
// rows of one half only (8 wide with 16-float vectors). c input channels;
// finite differences for the channel count fd_c.
struct HalfRowCase {
  const char* name;
  int n, h, w, oc, k, pad, fd_c;
};
static const HalfRowCase kHalfRows[] = {
    {"pairs 6 wide odd rows", 2, 9, 10, 5, 5, 0, 1},
    {"pairs 12 wide", 3, 10, 14, 7, 3, 0, 0},
    {"pairs 20 wide padded", 2, 7, 20, 6, 3, 1, 2},
    {"pairs 28 wide", 2, 8, 32, 9, 5, 0, 0},
    {"pairs 8 wide odd rows", 3, 13, 12, 5, 5, 0, 3},
    {"pairs 24 wide odd rows", 2, 11, 26, 7, 3, 0, 0},
    {"pairs 40 wide padded", 2, 6, 40, 4, 5, 2, 4},
};

static void TestHalfRows(const std::string& form, int c, const std::string& suffix) {
  for (const HalfRowCase& h : kHalfRows)
    TestConv(form + " " + h.name + suffix,
             CP(h.n, c, h.h, h.w, h.oc, h.k, h.k, 1, 1, h.pad, h.pad, h.pad, h.pad, 1, 1, 1),
             c == h.fd_c);
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
      TestHalfRows("taps dx", c, cs);
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
      TestHalfRows("shift", c, cs);
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

void TestConvAll() {
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
