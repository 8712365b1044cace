// Explicit instantiations of the CPU backend. This is the one file built with
// the fast-math flags (see CMakeLists.txt), so the loops vectorise.
#include "tensor_math_cpp.h"

namespace singa {

using CppMath = Math<lang::Cpp>;

#define SINGA_INSTANTIATE_UNARY_T(Op, T) \
  template void CppMath::Unary<Op, T>(const ElemSpace&, const T*, T*, Op, Context*);
#define SINGA_INSTANTIATE_UNARY(Op)    \
  SINGA_INSTANTIATE_UNARY_T(Op, float) \
  SINGA_INSTANTIATE_UNARY_T(Op, int32_t)
#define SINGA_INSTANTIATE_BINARY_T(Op, T)                                                 \
  template void CppMath::Binary<Op, T>(const ElemSpace&, const T*, const T*, T*, Op,      \
                                       Context*);                                         \
  template void CppMath::BinaryScalar<Op, T>(const ElemSpace&, const T*, T, bool, T*, Op, \
                                             Context*);
#define SINGA_INSTANTIATE_BINARY(Op)    \
  SINGA_INSTANTIATE_BINARY_T(Op, float) \
  SINGA_INSTANTIATE_BINARY_T(Op, int32_t)

#define SINGA_UNARY_OP(Name, expr) SINGA_INSTANTIATE_UNARY(op::Name)
#define SINGA_BINARY_OP(Name, expr) SINGA_INSTANTIATE_BINARY(op::Name)
#include "singa/core/ops.def"
SINGA_INSTANTIATE_UNARY(op::Identity)
SINGA_INSTANTIATE_UNARY(op::ClipOp)
SINGA_INSTANTIATE_UNARY(op::LeakyReLUOp)
SINGA_INSTANTIATE_BINARY(op::AxpbyOp)

#define SINGA_INSTANTIATE_CAST(TI, TO) \
  template void CppMath::Cast<TI, TO>(const ElemSpace&, const TI*, TO*, Context*);
#define SINGA_INSTANTIATE_CAST_FROM(TI) \
  SINGA_INSTANTIATE_CAST(TI, Half)      \
  SINGA_INSTANTIATE_CAST(TI, float)     \
  SINGA_INSTANTIATE_CAST(TI, int32_t)
SINGA_INSTANTIATE_CAST_FROM(Half)
SINGA_INSTANTIATE_CAST_FROM(float)
SINGA_INSTANTIATE_CAST_FROM(int32_t)

template void CppMath::Fill<Half>(const ElemSpace&, Half, Half*, Context*);

#define SINGA_INSTANTIATE_TYPED(T)                                                        \
  template void CppMath::Where<T>(const ElemSpace&, const T*, const T*, const T*, T*,     \
                                  Context*);                                              \
  template void CppMath::Fill<T>(const ElemSpace&, T, T*, Context*);                      \
  template void CppMath::Reduce<T>(ReduceKind, int64_t, int64_t, int64_t, const T*, T*,   \
                                   Context*);                                             \
  template void CppMath::ArgReduce<T>(bool, int64_t, int64_t, int64_t, const T*,          \
                                      int32_t*, Context*);                                \
  template void CppMath::Gemm<T>(bool, bool, int64_t, int64_t, int64_t, float, const T*,  \
                                 int64_t, const T*, int64_t, float, T*, int64_t,          \
                                 Context*);                                               \
  template void CppMath::GemmBatched<T>(bool, bool, int64_t, int64_t, int64_t, float,     \
                                        const T*, int64_t, int64_t, const T*, int64_t,    \
                                        int64_t, float, T*, int64_t, int64_t, int64_t,    \
                                        Context*);                                        \
  template void CppMath::Gaussian<T>(int64_t, float, float, T*, Context*);                \
  template void CppMath::Uniform<T>(int64_t, float, float, T*, Context*);                 \
  template void CppMath::Bernoulli<T>(int64_t, float, T*, Context*);                      \
  template void CppMath::IndexAdd<T>(int64_t, int64_t, int64_t, const T*, const int32_t*, \
                                     int64_t, T*, Context*);
SINGA_INSTANTIATE_TYPED(float)
SINGA_INSTANTIATE_TYPED(int32_t)

template void CppMath::Gemm<Half>(bool, bool, int64_t, int64_t, int64_t, float, const Half*,
                                  int64_t, const Half*, int64_t, float, Half*, int64_t,
                                  Context*);
template void CppMath::GemmBatched<Half>(bool, bool, int64_t, int64_t, int64_t, float,
                                         const Half*, int64_t, int64_t, const Half*, int64_t,
                                         int64_t, float, Half*, int64_t, int64_t, int64_t,
                                         Context*);
template void CppMath::Softmax<float>(bool, int64_t, int64_t, int64_t, const float*, float*,
                                      Context*);
template void CppMath::IndexSelect<uint16_t>(int64_t, int64_t, int64_t, const uint16_t*,
                                             const int32_t*, int64_t, uint16_t*, Context*);
template void CppMath::IndexSelect<uint32_t>(int64_t, int64_t, int64_t, const uint32_t*,
                                             const int32_t*, int64_t, uint32_t*, Context*);

}  // namespace singa
