// The cache of rearranged convolution weights (weight_cache.cc). For
// sources compiled once only: the per-ISA files must not include it (see
// cmake/CheckIsaSymbols.cmake).
#ifndef SINGA_SRC_CORE_NN_WEIGHT_CACHE_H_
#define SINGA_SRC_CORE_NN_WEIGHT_CACHE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

namespace singa {
namespace cpu {

// Weights rearranged for a kernel and kept between calls (weight_cache.cc),
// so that inference, which calls a layer again and again with the same
// weights, rearranges them once: Winograd's transforms (winograd_cpp.cc)
// and the one-vector tile's row panels (conv_cpp.cc). A buffer is reused
// only for the same pointer, shape, direction and form while the weights'
// Block::stamp() is unchanged, i.e. nothing has written the block since
// (ConvParams::w_stamp). At most 64 MB are kept in all
// (SINGA_WEIGHT_CACHE_MB sets the bound, 0 turns the cache off; the older
// name SINGA_WINOGRAD_CACHE_MB is read too).
struct WeightKey {
  uint64_t stamp;  // 0: unknown, never cached
  const float* w;
  int K, C;
  bool flip;
  int form;  // Winograd: the output tile side (4 or 2); else kPanelForm + rows
  int isa;   // the family whose layout the buffer has (int(ActiveIsa()))
};
constexpr int kPanelForm = 1000;

// When the buffer for `key` may be made.
enum class Fill {
  kFirstCall,   // on the first call that asks for it
  kSecondCall,  // only when an earlier call asked for the same weights with
                // the same stamp: weights that change between calls
                // (training) are never rearranged for nothing
};

// The buffer for `key` (`floats` floats, 64-byte aligned): the kept one,
// or one that `fill` has just written; null when nothing may be kept (stamp
// 0, larger than the bound, not yet asked for twice under kSecondCall, or
// the cache is full of buffers in use, see weight_cache.cc), and the caller
// then does without.
std::shared_ptr<const float> CachedWeights(
    const WeightKey& key, size_t floats,
    const std::function<void(float*)>& fill, Fill when = Fill::kFirstCall);
struct WeightCacheStats {
  uint64_t hits, misses;
  size_t entries, bytes;  // entries with a buffer, and their bytes
};
WeightCacheStats GetWeightCacheStats();
void SetWeightCacheBytes(size_t bytes);
void ClearWeightCache();  // also zeroes the counts

}  // namespace cpu
}  // namespace singa

#endif  // SINGA_SRC_CORE_NN_WEIGHT_CACHE_H_
