// An 8 x 8 transpose of 4-byte values in vector registers, for the per-ISA
// files (tensor_math_cpp.h's transposing copies, the convolution's weight
// rearrangement in conv_isa.cc). It lives in the family's own namespace
// (see isa_vec.h), so the families' copies never meet at link time.
#ifndef SINGA_SRC_CORE_TENSOR_TRANSPOSE8_H_
#define SINGA_SRC_CORE_TENSOR_TRANSPOSE8_H_

#include <cstdint>
#include <cstring>

#ifndef SINGA_ISA_NS
#error "transpose8.h is for per-ISA files: define SINGA_ISA_NS"
#endif

namespace singa {
namespace cpu {
namespace SINGA_ISA_NS {

// out[i * ldo + j] = in[j * ldi + i] for an 8 x 8 block of 4-byte values, as
// eight vector loads, three rounds of two-input shuffles and eight stores
// (the scalar loop moves one value per load and store).
template <typename T>
inline void Transpose8x8(const T* in, int64_t ldi, T* out, int64_t ldo) {
  static_assert(sizeof(T) == 4, "4-byte values");
  typedef T V __attribute__((vector_size(32)));
  typedef int32_t M __attribute__((vector_size(32)));
  V r[8], t[8];
  for (int k = 0; k < 8; ++k) std::memcpy(&r[k], in + k * ldi, sizeof(V));
  const M lo{0, 8, 1, 9, 4, 12, 5, 13}, hi{2, 10, 3, 11, 6, 14, 7, 15};
  for (int k = 0; k < 8; k += 2) {
    t[k] = __builtin_shuffle(r[k], r[k + 1], lo);
    t[k + 1] = __builtin_shuffle(r[k], r[k + 1], hi);
  }
  const M even{0, 1, 8, 9, 4, 5, 12, 13}, odd{2, 3, 10, 11, 6, 7, 14, 15};
  for (int k = 0; k < 8; k += 4) {
    r[k] = __builtin_shuffle(t[k], t[k + 2], even);
    r[k + 1] = __builtin_shuffle(t[k], t[k + 2], odd);
    r[k + 2] = __builtin_shuffle(t[k + 1], t[k + 3], even);
    r[k + 3] = __builtin_shuffle(t[k + 1], t[k + 3], odd);
  }
  const M first{0, 1, 2, 3, 8, 9, 10, 11}, second{4, 5, 6, 7, 12, 13, 14, 15};
  for (int k = 0; k < 4; ++k) {
    const V a = __builtin_shuffle(r[k], r[k + 4], first);
    const V b = __builtin_shuffle(r[k], r[k + 4], second);
    std::memcpy(out + k * ldo, &a, sizeof(V));
    std::memcpy(out + (k + 4) * ldo, &b, sizeof(V));
  }
}

}  // namespace SINGA_ISA_NS
}  // namespace cpu
}  // namespace singa

#endif  // SINGA_SRC_CORE_TENSOR_TRANSPOSE8_H_
