// The bundled OpenBLAS (scipy-openblas32 wheel) exports every symbol with a
// "scipy_" prefix so it cannot clash with another BLAS loaded in the same
// process. Code calls SINGA_BLAS(cblas_sgemm)(...) so that a plain system
// CBLAS can be swapped in by defining SINGA_BLAS_NO_PREFIX.
#ifndef SINGA_CORE_BLAS_H_
#define SINGA_CORE_BLAS_H_

#include <cblas.h>

#ifdef SINGA_BLAS_NO_PREFIX
#define SINGA_BLAS(name) name
#else
#define SINGA_BLAS(name) scipy_##name
#endif

namespace singa {

// Routes OpenBLAS's parallel jobs through the OpenMP team for the whole
// process (src/core/device/blas_threads.cc). Idempotent; a no-op with a
// system CBLAS or without OpenMP.
void UseOpenMPForBlas();

// Sets the threads OpenBLAS splits its work into (a no-op with a system
// CBLAS, which keeps its own setting).
void SetBlasThreads(int n);

// Whether the BLAS's kernels use AVX-512: the bundled OpenBLAS names the
// kernels it picked for this CPU (it runs its AVX2 "Haswell" ones on AMD
// Zen 5, for one). True for a system CBLAS, which cannot be asked.
bool BlasKernelsAvx512();

}  // namespace singa

#endif  // SINGA_CORE_BLAS_H_
