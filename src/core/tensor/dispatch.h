// Internal helpers of tensor*.cc: dtype and language switches, and the
// checks every op makes before queuing work.
#ifndef SINGA_SRC_CORE_TENSOR_DISPATCH_H_
#define SINGA_SRC_CORE_TENSOR_DISPATCH_H_

#include "singa/core/tensor.h"
#include "tensor_math.h"

namespace singa {

// Ops compute on float32 and int32 (float16 is converted first). These run
// before Exec, so that a closure never meets a dtype it cannot handle.
inline void CheckComputeType(const char* op, DataType dtype) {
  SINGA_CHECK(dtype == kFloat32 || dtype == kInt, DtypeError, op,
              ": unsupported dtype ", DataTypeName(dtype));
}
inline void CheckFloat32(const char* op, DataType dtype) {
  SINGA_CHECK(dtype == kFloat32, DtypeError, op, ": needs a float32 tensor, got ",
              DataTypeName(dtype));
}

// Inside an Exec closure, after CheckComputeType: runs the statement with T
// bound to int32_t for int32 and to float otherwise. It has no error branch
// because closures must not throw for user input (doc/design.md).
#define SINGA_TYPE_SWITCH(dtype, T, ...) \
  do {                                   \
    if ((dtype) == kInt) {               \
      using T = int32_t;                 \
      __VA_ARGS__;                       \
    } else {                             \
      using T = float;                   \
      __VA_ARGS__;                       \
    }                                    \
  } while (0)

// Runs the statement with Lang bound to the device's backend tag.
#ifdef USE_CUDA
#define SINGA_LANG_SWITCH(device, Lang, ...) \
  do {                                       \
    if ((device)->is_host()) {               \
      using Lang = lang::Cpp;                \
      __VA_ARGS__;                           \
    } else {                                 \
      using Lang = lang::Cuda;               \
      __VA_ARGS__;                           \
    }                                        \
  } while (0)
#else
#define SINGA_LANG_SWITCH(device, Lang, ...) \
  do {                                       \
    using Lang = lang::Cpp;                  \
    __VA_ARGS__;                             \
  } while (0)
#endif

// Strides of x viewed with shape out_shape (right-aligned broadcasting);
// broadcast dimensions get stride 0.
Strides BroadcastStrides(const Tensor& x, const Shape& out_shape,
                         const char* op);

inline void CheckSameDtype(const char* op, const Tensor& a, const Tensor& b) {
  SINGA_CHECK(a.data_type() == b.data_type(), DtypeError, op, ": dtypes ",
              DataTypeName(a.data_type()), " and ",
              DataTypeName(b.data_type()), " differ (cast one with as_type)");
}

// True when an element-wise op may read x while writing out: they use
// different Blocks, or the very same elements in the same layout. False
// when they share a Block in another layout.
bool SafeToWriteOver(const Tensor& x, const Tensor& out);
// x itself, or a contiguous copy when writing out would overwrite x's
// elements before they are read.
Tensor Unaliased(const Tensor& x, const Tensor& out);

}  // namespace singa

#endif  // SINGA_SRC_CORE_TENSOR_DISPATCH_H_
