// The CPU kernels' instruction-set family (see singa/core/cpu_isa.h) and a
// probe of the machine's multiply-add peak, for benchmarks and tests.
%{
#include "singa/core/cpu_isa.h"
%}

namespace singa {

std::string CpuIsa();
void SetCpuIsa(const std::string& name);
double CpuFmaPeak(int threads, double seconds);

}  // namespace singa
