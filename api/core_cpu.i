// The CPU kernels' instruction-set family (see singa/core/cpu_isa.h), probes
// of the machine's multiply-add peak and of its core-to-core latency, and
// the choice between the small-GEMM kernel and the BLAS, for benchmarks and
// tests.
%{
#include "singa/core/cpu_isa.h"
%}

namespace singa {

std::string CpuIsa();
void SetCpuIsa(const std::string& name);
double CpuFmaPeak(int threads, double seconds);
double CpuCoreToCoreNs(int cpu_a, int cpu_b, double seconds);
std::string CpuGemmPath();
void SetCpuGemmPath(const std::string& name);

}  // namespace singa
