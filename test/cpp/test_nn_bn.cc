// Batch-norm checks of the standalone nn-kernel test.
#include "nn_test_util.h"
#include "nn_test_families.h"

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
  // Analytic reference: dx = g/sigma * (dy - mean(dy) - xhat*mean(dy*xhat)),
  // at the statistics the backward is given (the forward's float mean and
  // variance): with x around 1000, the float mean alone differs from the
  // exact one by up to half an ulp of 1000, which moves dscale by about as
  // much as its tolerance.
  DVec rdx(x.size()), rds(c, 0.0), rdb(c, 0.0);
  const double cnt = double(n) * hw;
  for (int ch = 0; ch < c; ++ch) {
    const double mu = mean[ch];
    const double inv = 1.0 / std::sqrt(double(var[ch]) + eps);
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < hw; ++j) {
        const size_t k = (size_t(i) * c + ch) * hw + j;
        rdb[ch] += dyd[k];
        rds[ch] += dyd[k] * (xd[k] - mu) * inv;
      }
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < hw; ++j) {
        const size_t k = (size_t(i) * c + ch) * hw + j;
        const double xh = (xd[k] - mu) * inv;
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

void TestBatchNormAll() {
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
