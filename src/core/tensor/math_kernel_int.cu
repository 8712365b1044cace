// CUDA instantiations of the unary ops.def functors (and clip, leaky ReLU)
// on int32; the math functions compute int32 arguments in double, as std::
// does on the host (tensor_math.h).
#include "tensor_math_cuda.h"

namespace singa {

#define SINGA_INSTANTIATE_UNARY(Op)                                                 \
  template void Math<lang::Cuda>::Unary<Op, int32_t>(const ElemSpace&, const int32_t*, \
                                                     int32_t*, Op, Context*);
#define SINGA_UNARY_OP(Name, expr) SINGA_INSTANTIATE_UNARY(op::Name)
#include "singa/core/ops.def"
SINGA_INSTANTIATE_UNARY(op::Identity)
SINGA_INSTANTIATE_UNARY(op::ClipOp)
SINGA_INSTANTIATE_UNARY(op::LeakyReLUOp)

}  // namespace singa
