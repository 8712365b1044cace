// Explicit instantiations of the CPU backend. This is the one file built with
// the fast-math flags (see CMakeLists.txt), so the loops vectorise.
#include "tensor_math_cpp.h"

namespace singa {

using CppMath = Math<lang::Cpp>;

#define SINGA_INSTANTIATE_UNARY(Op)                                          \
  template void CppMath::Unary<Op, float>(const ElemSpace&, const float*,    \
                                          float*, Op);                       \
  template void CppMath::Unary<Op, int32_t>(const ElemSpace&, const int32_t*, \
                                            int32_t*, Op);
#define SINGA_INSTANTIATE_BINARY(Op)                                          \
  template void CppMath::Binary<Op, float>(const ElemSpace&, const float*,    \
                                           const float*, float*, Op);         \
  template void CppMath::Binary<Op, int32_t>(const ElemSpace&, const int32_t*, \
                                             const int32_t*, int32_t*, Op);

#define SINGA_UNARY_OP(Name, expr) SINGA_INSTANTIATE_UNARY(op::Name)
#define SINGA_BINARY_OP(Name, expr) SINGA_INSTANTIATE_BINARY(op::Name)
#include "singa/core/ops.def"
SINGA_INSTANTIATE_UNARY(op::Identity)
SINGA_INSTANTIATE_UNARY(op::ClipOp)
SINGA_INSTANTIATE_UNARY(op::LeakyReLUOp)
SINGA_INSTANTIATE_BINARY(op::AxpbyOp)

#define SINGA_INSTANTIATE_CAST(TI, TO) \
  template void CppMath::Cast<TI, TO>(const ElemSpace&, const TI*, TO*);
#define SINGA_INSTANTIATE_CAST_FROM(TI) \
  SINGA_INSTANTIATE_CAST(TI, Half)      \
  SINGA_INSTANTIATE_CAST(TI, float)     \
  SINGA_INSTANTIATE_CAST(TI, int32_t)
SINGA_INSTANTIATE_CAST_FROM(Half)
SINGA_INSTANTIATE_CAST_FROM(float)
SINGA_INSTANTIATE_CAST_FROM(int32_t)

template void CppMath::Fill<Half>(const ElemSpace&, Half, Half*);

#define SINGA_INSTANTIATE_TYPED(T)                                            \
  template void CppMath::Where<T>(const ElemSpace&, const T*, const T*,       \
                                  const T*, T*);                              \
  template void CppMath::Fill<T>(const ElemSpace&, T, T*);                    \
  template void CppMath::Reduce<T>(ReduceKind, int64_t, int64_t, int64_t,     \
                                   const T*, T*);                             \
  template void CppMath::ArgReduce<T>(bool, int64_t, int64_t, int64_t,        \
                                      const T*, int32_t*);                    \
  template void CppMath::Gemm<T>(bool, bool, int64_t, int64_t, int64_t, float, \
                                 const T*, int64_t, const T*, int64_t, float,  \
                                 T*, int64_t);                                 \
  template void CppMath::Gaussian<T>(int64_t, float, float, T*, Context*);    \
  template void CppMath::Uniform<T>(int64_t, float, float, T*, Context*);     \
  template void CppMath::Bernoulli<T>(int64_t, float, T*, Context*);
SINGA_INSTANTIATE_TYPED(float)
SINGA_INSTANTIATE_TYPED(int32_t)

template void CppMath::Softmax<float>(bool, int64_t, int64_t, int64_t,
                                      const float*, float*);

}  // namespace singa
