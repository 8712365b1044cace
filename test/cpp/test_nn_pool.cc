// Pooling checks of the standalone nn-kernel test.
#include "nn_test_util.h"
#include "nn_test_families.h"

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

void TestPoolAll() {
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
