// Standalone test of the small-GEMM kernel (src/core/tensor/gemm_small_isa.cc)
// for the ISA family it is compiled for (SINGA_ISA_NS, SINGA_ISA_LEVEL), against
// double-precision loops: every transpose combination, row counts around the
// tile height (6 or 12) and its remainders, narrow and whole panels, reductions
// over several blocks, alpha and beta. test/python/test_gemm_small.py builds it
// per family, the AVX-512 copy compiled for AVX2 where the CPU lacks AVX-512,
// so its tile shapes and tails run on every x86-64 machine.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

namespace singa {
namespace cpu {
namespace SINGA_ISA_NS {
void SmallGemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
               const float* a, int64_t lda, const float* b, int64_t ldb, float beta,
               float* c, int64_t ldc);
}  // namespace SINGA_ISA_NS
}  // namespace cpu
}  // namespace singa

int main() {
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  int cases = 0, failed = 0;
  for (int m : {1, 5, 11, 12, 13, 14, 17, 18, 23, 25, 30, 128, 200})
    for (int n : {1, 10, 16, 17, 33, 256})
      for (int k : {1, 7, 16, 33, 300, 784, 1100})
        for (int t = 0; t < 4; ++t) {
          const bool ta = t & 1, tb = t & 2;
          const float alpha = (m + n) % 3 == 0 ? 1.f : -0.75f;
          const float beta = k % 2 ? 0.f : 0.5f;
          std::vector<float> a(size_t(m) * k), b(size_t(k) * n), c(size_t(m) * n);
          for (auto* v : {&a, &b, &c})
            for (float& x : *v) x = normal(rng);
          if (beta == 0.f)
            for (float& x : c) x = NAN;  // beta 0 must not read C
          const std::vector<float> c0 = c;
          singa::cpu::SINGA_ISA_NS::SmallGemm(ta, tb, m, n, k, alpha, a.data(), ta ? m : k,
                                              b.data(), tb ? k : n, beta, c.data(), n);
          bool ok = true;
          for (int i = 0; i < m && ok; ++i)
            for (int j = 0; j < n && ok; ++j) {
              double s = 0;
              for (int p = 0; p < k; ++p)
                s += double(ta ? a[size_t(p) * m + i] : a[size_t(i) * k + p]) *
                     double(tb ? b[size_t(j) * k + p] : b[size_t(p) * n + j]);
              double want = alpha * s;
              if (beta != 0.f) want += beta * double(c0[size_t(i) * n + j]);
              const double got = c[size_t(i) * n + j];
              if (!(std::fabs(got - want) <= 4e-5 * (std::sqrt(double(k)) + 1))) {
                std::printf("FAIL m=%d n=%d k=%d ta=%d tb=%d at (%d, %d): %.7g, want %.7g\n",
                            m, n, k, int(ta), int(tb), i, j, got, want);
                ok = false;
              }
            }
          ++cases;
          failed += !ok;
        }
  std::printf("%d cases, %d failed\n", cases, failed);
  return failed != 0;
}
