// CUDA instantiations of the binary ops.def functors on two tensors (the
// tensor-scalar forms are in math_kernel_scalar.cu, so that the two compile
// in parallel).
#include "tensor_math_cuda.h"

namespace singa {

using CudaMath = Math<lang::Cuda>;

#define SINGA_INSTANTIATE_BINARY_T(Op, T)                                             \
  template void CudaMath::Binary<Op, T>(const ElemSpace&, const T*, const T*, T*, Op, \
                                        Context*);
#define SINGA_INSTANTIATE_BINARY(Op)    \
  SINGA_INSTANTIATE_BINARY_T(Op, float) \
  SINGA_INSTANTIATE_BINARY_T(Op, int32_t)

#define SINGA_BINARY_OP(Name, expr) SINGA_INSTANTIATE_BINARY(op::Name)
#include "singa/core/ops.def"

}  // namespace singa
