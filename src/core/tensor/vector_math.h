// Declares glibc's vector math library (libmvec) variants of the float
// functions, so loops over std::exp and friends vectorise without
// -ffinite-math-only (glibc's own headers only offer them with it). CMake
// defines SINGA_HAVE_MVEC after checking that libmvec links.
#ifndef SINGA_SRC_CORE_TENSOR_VECTOR_MATH_H_
#define SINGA_SRC_CORE_TENSOR_VECTOR_MATH_H_

#if defined(SINGA_HAVE_MVEC) && defined(__x86_64__) && defined(_OPENMP)
extern "C" {
#define SINGA_SIMD_DECL(fn) _Pragma("omp declare simd notinbranch") float fn(float) noexcept;
SINGA_SIMD_DECL(expf)
SINGA_SIMD_DECL(logf)
SINGA_SIMD_DECL(log1pf)
SINGA_SIMD_DECL(sinf)
SINGA_SIMD_DECL(cosf)
SINGA_SIMD_DECL(tanf)
SINGA_SIMD_DECL(asinf)
SINGA_SIMD_DECL(acosf)
SINGA_SIMD_DECL(atanf)
SINGA_SIMD_DECL(sinhf)
SINGA_SIMD_DECL(coshf)
SINGA_SIMD_DECL(tanhf)
SINGA_SIMD_DECL(asinhf)
SINGA_SIMD_DECL(acoshf)
SINGA_SIMD_DECL(atanhf)
SINGA_SIMD_DECL(erff)
#undef SINGA_SIMD_DECL
#pragma omp declare simd notinbranch
float powf(float, float) noexcept;
}
#endif

#endif  // SINGA_SRC_CORE_TENSOR_VECTOR_MATH_H_
