// The CPU backend's kernels for one ISA family: CMakeLists.txt compiles this
// file once per family, with that family's flags and SINGA_ISA_NS naming
// the namespace the copy lives in.
#include "tensor_math_cpp.h"

namespace singa {
namespace cpu {
namespace SINGA_ISA_NS {

#define SINGA_CPU_UNARY(Op, T) \
  template void Unary<Op, T>(const ElemSpace&, const T*, T*, Op);
#define SINGA_CPU_BINARY(Op, T) \
  template void Binary<Op, T>(const ElemSpace&, const T*, const T*, T*, Op);
#define SINGA_CPU_CAST(TI, TO) \
  template void Cast<TI, TO>(const ElemSpace&, const TI*, TO*);
#define SINGA_CPU_FILL(T) template void Fill<T>(const ElemSpace&, T, T*);
#define SINGA_CPU_TYPED(T)                                                   \
  template void Where<T>(const ElemSpace&, const T*, const T*, const T*,     \
                         T*);                                                \
  template void Reduce<T>(ReduceKind, int64_t, int64_t, int64_t, const T*,   \
                          T*);                                               \
  template void ArgReduce<T>(bool, int64_t, int64_t, int64_t, const T*,      \
                             int32_t*);
#define SINGA_CPU_SOFTMAX(T) \
  template void Softmax<T>(bool, int64_t, int64_t, int64_t, const T*, T*);
#include "tensor_math_cpp_list.h"

}  // namespace SINGA_ISA_NS
}  // namespace cpu
}  // namespace singa
