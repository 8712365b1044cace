// CUDA instantiations of the unary ops.def functors (and clip, leaky ReLU):
// the same functor structs as the CPU backend, run by the element-wise
// kernels of tensor_math_cuda.h.
#include "tensor_math_cuda.h"

namespace singa {

using CudaMath = Math<lang::Cuda>;

#define SINGA_INSTANTIATE_UNARY_T(Op, T) \
  template void CudaMath::Unary<Op, T>(const ElemSpace&, const T*, T*, Op, Context*);
#define SINGA_INSTANTIATE_UNARY(Op)    \
  SINGA_INSTANTIATE_UNARY_T(Op, float) \
  SINGA_INSTANTIATE_UNARY_T(Op, int32_t)

#define SINGA_UNARY_OP(Name, expr) SINGA_INSTANTIATE_UNARY(op::Name)
#include "singa/core/ops.def"
SINGA_INSTANTIATE_UNARY(op::Identity)
SINGA_INSTANTIATE_UNARY(op::ClipOp)
SINGA_INSTANTIATE_UNARY(op::LeakyReLUOp)

}  // namespace singa
