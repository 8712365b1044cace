// Standalone checks for singa::cpu conv / pool / batch-norm kernels.
//
// Every kernel is compared with a direct, loop-per-definition reference that
// accumulates in double. Backward kernels are additionally compared with
// central finite differences of the double reference forward, so a mistake
// shared by a kernel and its reference backward would still be caught.
// Ends with timings of the LeNet conv layers used by the training benchmark.
//
// The checks are split by family (test_nn_conv.cc, test_nn_winograd.cc,
// test_nn_pool.cc, test_nn_bn.cc; shared harness in nn_test_util.h); this
// file runs them for every ISA family and holds the timings.

#include "nn_test_util.h"
#include "nn_test_families.h"

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
