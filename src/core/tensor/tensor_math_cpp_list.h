// Every (kernel, type) pair the CPU backend instantiates, as one list that
// both the per-ISA kernels (tensor_math_cpp_isa.cc) and the dispatching
// Math<lang::Cpp> (tensor_math_cpp.cc) expand. The includer defines
//   SINGA_CPU_UNARY(Op, T), SINGA_CPU_BINARY(Op, T), SINGA_CPU_CAST(TI, TO),
//   SINGA_CPU_FILL(T), SINGA_CPU_TYPED(T) (Where, Reduce, ArgReduce) and
//   SINGA_CPU_SOFTMAX(T).
#define SINGA_UNARY_OP(Name, expr) \
  SINGA_CPU_UNARY(op::Name, float) SINGA_CPU_UNARY(op::Name, int32_t)
#define SINGA_BINARY_OP(Name, expr) \
  SINGA_CPU_BINARY(op::Name, float) SINGA_CPU_BINARY(op::Name, int32_t)
#include "singa/core/ops.def"
#define SINGA_CPU_UNARY_BOTH(Op) \
  SINGA_CPU_UNARY(Op, float) SINGA_CPU_UNARY(Op, int32_t)
SINGA_CPU_UNARY_BOTH(op::Identity)
SINGA_CPU_UNARY_BOTH(op::ClipOp)
SINGA_CPU_UNARY_BOTH(op::LeakyReLUOp)
#undef SINGA_CPU_UNARY_BOTH
SINGA_CPU_BINARY(op::AxpbyOp, float)
SINGA_CPU_BINARY(op::AxpbyOp, int32_t)

#define SINGA_CPU_CAST_FROM(TI) \
  SINGA_CPU_CAST(TI, Half) SINGA_CPU_CAST(TI, float) SINGA_CPU_CAST(TI, int32_t)
SINGA_CPU_CAST_FROM(Half)
SINGA_CPU_CAST_FROM(float)
SINGA_CPU_CAST_FROM(int32_t)
#undef SINGA_CPU_CAST_FROM

SINGA_CPU_FILL(Half)
SINGA_CPU_FILL(float)
SINGA_CPU_FILL(int32_t)
SINGA_CPU_TYPED(float)
SINGA_CPU_TYPED(int32_t)
SINGA_CPU_SOFTMAX(float)
