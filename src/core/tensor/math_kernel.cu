// CUDA instantiations of the unary ops.def functors (and clip, leaky ReLU)
// on float32: the same functor structs as the CPU backend, run by the
// element-wise kernels of tensor_math_cuda.h. int32 is in
// math_kernel_int.cu, so that the two compile in parallel.
#include "tensor_math_cuda.h"

namespace singa {

#define SINGA_INSTANTIATE_UNARY(Op)                                                       \
  template void Math<lang::Cuda>::Unary<Op, float>(const ElemSpace&, const float*, float*, \
                                                   Op, Context*);
#define SINGA_UNARY_OP(Name, expr) SINGA_INSTANTIATE_UNARY(op::Name)
#include "singa/core/ops.def"
SINGA_INSTANTIATE_UNARY(op::Identity)
SINGA_INSTANTIATE_UNARY(op::ClipOp)
SINGA_INSTANTIATE_UNARY(op::LeakyReLUOp)

}  // namespace singa
