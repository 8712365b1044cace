// CUDA instantiations of the binary ops.def functors with a scalar operand
// on either side.
#include "tensor_math_cuda.h"

namespace singa {

using CudaMath = Math<lang::Cuda>;

#define SINGA_INSTANTIATE_SCALAR_T(Op, T)                                                   \
  template void CudaMath::BinaryScalar<Op, T>(const ElemSpace&, const T*, T, bool, T*, Op, \
                                              Context*);
#define SINGA_INSTANTIATE_SCALAR(Op)    \
  SINGA_INSTANTIATE_SCALAR_T(Op, float) \
  SINGA_INSTANTIATE_SCALAR_T(Op, int32_t)

#define SINGA_BINARY_OP(Name, expr) SINGA_INSTANTIATE_SCALAR(op::Name)
#include "singa/core/ops.def"

}  // namespace singa
