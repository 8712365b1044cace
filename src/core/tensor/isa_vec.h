// The vector type of the ISA family a per-ISA file is compiled for (see
// cpu_isa.h): kVW float lanes (4 baseline, 8 AVX2, 16 AVX-512) as a GCC
// vector, with unaligned loads and stores. Everything here lives in the
// family's own namespace with internal linkage, so the families' copies
// never meet at link time.
#ifndef SINGA_SRC_CORE_TENSOR_ISA_VEC_H_
#define SINGA_SRC_CORE_TENSOR_ISA_VEC_H_

#include <cstdint>
#include <cstring>

#ifndef SINGA_ISA_NS
#error "isa_vec.h is for per-ISA files: define SINGA_ISA_NS and SINGA_ISA_LEVEL"
#endif

namespace singa {
namespace cpu {
namespace SINGA_ISA_NS {
namespace {

#if SINGA_ISA_LEVEL >= 2
constexpr int kVW = 16;
#elif SINGA_ISA_LEVEL == 1
constexpr int kVW = 8;
#else
constexpr int kVW = 4;
#endif

typedef float Vec __attribute__((vector_size(kVW * sizeof(float))));
typedef int32_t IVec __attribute__((vector_size(kVW * sizeof(int32_t))));

inline Vec Load(const float* p) {
  Vec v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void Store(float* p, Vec v) { std::memcpy(p, &v, sizeof v); }

}  // namespace
}  // namespace SINGA_ISA_NS
}  // namespace cpu
}  // namespace singa

#endif  // SINGA_SRC_CORE_TENSOR_ISA_VEC_H_
