// Basic types shared by the core: data types, shapes and Block, the
// ref-counted owner of one device allocation.
#ifndef SINGA_CORE_COMMON_H_
#define SINGA_CORE_COMMON_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "singa/core/error.h"

namespace singa {

// SINGA's codes and order. float32 and int32 are computed; float16 is
// stored (and computed where a backend can); kChar and kDouble are codes
// only: making a tensor of them raises DtypeError.
enum DataType {
  kFloat32 = 0,
  kFloat16 = 1,
  kInt = 2,
  kChar = 3,
  kDouble = 4,
  kNumDataType = 5
};
// True for the dtypes a Tensor may hold.
inline bool IsStorableType(int t) { return t == kFloat32 || t == kFloat16 || t == kInt; }

using Shape = std::vector<size_t>;
// Strides are in elements and signed, so views can be described uniformly.
using Strides = std::vector<int64_t>;

inline size_t SizeOf(DataType t) {
  switch (t) {
    case kFloat16:
      return 2;
    case kFloat32:
    case kInt:
      return 4;
    default:
      SINGA_THROW(DtypeError, "unknown dtype code ", static_cast<int>(t));
  }
}

inline std::string DataTypeName(DataType t) {
  switch (t) {
    case kFloat16:
      return "float16";
    case kFloat32:
      return "float32";
    case kInt:
      return "int32";
    case kChar:
      return "int8";
    case kDouble:
      return "float64";
    default:
      return "dtype(" + std::to_string(static_cast<int>(t)) + ")";
  }
}

// Number of elements, throwing MemoryError when the product overflows.
size_t Product(const Shape& shape);

// Row-major strides of a contiguous tensor of this shape.
Strides ContiguousStrides(const Shape& shape);

namespace lang {
// Tags that select a backend in the templates of tensor_math.h.
struct Cpp {};
struct Cuda {};
}  // namespace lang

class Device;

// One allocation on one device, shared by every Tensor that views it. The
// memory is taken lazily, on the first data()/mutable_data(), so a Tensor
// made while a graph is recorded gets memory only when recorded work first
// runs; graph mode also hands it back after its last reader (Release) and
// lets the next access take it again. The device that made it frees it
// when the last Tensor holding it goes away.
class Block : public std::enable_shared_from_this<Block> {
 public:
  Block(size_t size, std::shared_ptr<Device> device)
      : size_(size), device_(std::move(device)) {}
  ~Block();
  Block(const Block&) = delete;
  Block& operator=(const Block&) = delete;

  // Every write to the contents goes through here (data() is const), so it
  // takes a new stamp (below).
  void* mutable_data() {
    if (!data_ && size_) Allocate();
    Touch();
    return data_;
  }
  const void* data() const {
    if (!data_ && size_) Allocate();
    return data_;
  }
  size_t size() const { return size_; }
  Device* device() const { return device_.get(); }
  // True while the block holds memory.
  bool allocated() const { return data_ != nullptr; }
  // Returns the memory to the device (or lets go of placed memory); its
  // contents are lost.
  void Release();
  // Uses memory owned by someone else (a graph's arena) until Release.
  void Place(void* ptr) {
    Release();
    data_ = ptr;
    owned_ = false;
    Touch();
  }
  // Names the current contents: a process-wide counter gives the block a
  // new value at construction and on every mutable_data(), Place and
  // Release, so two equal stamps mean the same block with no write access
  // in between, even after freed memory is reused by another block. Values
  // derived from the contents (Winograd's transformed weights) are cached
  // under it. 0 means "not tracked": see ExportWritable.
  uint64_t stamp() const { return stamp_.load(std::memory_order_relaxed); }
  // For memory handed out to be written later, outside mutable_data() (a
  // writable buffer exported to Python): the stamp is 0 from then on, so
  // nothing is ever cached from this block.
  void ExportWritable() {
    exported_.store(true, std::memory_order_relaxed);
    stamp_.store(0, std::memory_order_relaxed);
  }

 private:
  static uint64_t NewStamp();
  void Touch() {
    if (!exported_.load(std::memory_order_relaxed))
      stamp_.store(NewStamp(), std::memory_order_relaxed);
  }
  void Allocate() const;  // throws MemoryError naming the size
  std::atomic<uint64_t> stamp_{NewStamp()};
  std::atomic<bool> exported_{false};
  mutable void* data_ = nullptr;
  bool owned_ = true;
  size_t size_;
  std::shared_ptr<Device> device_;
};

// IEEE binary16 <-> binary32 conversion, round to nearest even. A NaN stays
// NaN with its quiet bit set and its payload's top bits kept, bit for bit
// what the F16C instructions (vcvtps2ph, vcvtph2ps) give, so the scalar and
// vector CPU kernels agree on every input.
inline float HalfToFloat(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t man = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (man == 0) {
      bits = sign;
    } else {  // subnormal: normalise the mantissa
      int e = -1;
      do {
        ++e;
        man <<= 1;
      } while ((man & 0x400u) == 0);
      bits = sign | static_cast<uint32_t>(127 - 15 - e) << 23 |
             (man & 0x3ffu) << 13;
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (man != 0 ? 0x400000u : 0u) | man << 13;
  } else {
    bits = sign | (exp + 127 - 15) << 23 | man << 13;
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline uint16_t FloatToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  uint32_t absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u)  // inf or nan
    return sign | 0x7c00u |
           (absx > 0x7f800000u ? 0x200u | (absx & 0x7fffffu) >> 13 : 0u);
  if (absx >= 0x477ff000u) return sign | 0x7c00u;  // rounds past 65504
  if (absx < 0x38800000u) {                        // result is subnormal
    if (absx < 0x33000000u) return sign;           // below half the tiniest
    uint32_t man = (absx & 0x7fffffu) | 0x800000u;
    int shift = 126 - static_cast<int>(absx >> 23);  // 14..24
    uint32_t half = man >> shift;
    uint32_t rem = man & ((1u << shift) - 1);
    uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1u))) ++half;
    return sign | static_cast<uint16_t>(half);
  }
  uint32_t h = ((absx >> 23) - 127 + 15) << 10 | (absx >> 13 & 0x3ffu);
  uint32_t rem = absx & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return sign | static_cast<uint16_t>(h);
}

}  // namespace singa

#endif  // SINGA_CORE_COMMON_H_
