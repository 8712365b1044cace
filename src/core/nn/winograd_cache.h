// The cache of transformed Winograd weights (winograd_cache.cc). For
// sources compiled once only: the per-ISA files must not include it (see
// cmake/CheckIsaSymbols.cmake).
#ifndef SINGA_SRC_CORE_NN_WINOGRAD_CACHE_H_
#define SINGA_SRC_CORE_NN_WINOGRAD_CACHE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

namespace singa {
namespace cpu {

// Transformed weights kept between calls (winograd_cache.cc), so that
// inference, which calls a layer again and again with the same weights,
// transforms them once. A buffer is reused only for the same pointer,
// shape, direction and tiling while the weights' Block::stamp() is
// unchanged, i.e. nothing has written the block since
// (ConvParams::w_stamp). Only shared
// transforms (at most 8 MB each, see winograd_cpp.cc) are kept, at most
// 32 MB in all (SINGA_WINOGRAD_CACHE_MB sets the bound; 0 turns it off).
struct WinoWeightKey {
  uint64_t stamp;  // 0: unknown, never cached
  const float* w;
  int K, C;
  bool flip;
  int tile;  // the output tile side, 4 or 2
  int isa;   // the family whose layout U has (static_cast of ActiveIsa())
};
// The transform for `key` (`floats` floats, 64-byte aligned): the kept one,
// or a buffer that `fill` has just written; null when nothing may be kept
// (stamp 0, or larger than the bound), and the caller transforms as before.
std::shared_ptr<const float> CachedWinoWeights(
    const WinoWeightKey& key, size_t floats,
    const std::function<void(float*)>& fill);
struct WinogradCacheStats {
  uint64_t hits, misses;
  size_t entries, bytes;
};
WinogradCacheStats GetWinogradCacheStats();
void SetWinogradCacheBytes(size_t bytes);
void ClearWinogradCache();  // also zeroes the counts

}  // namespace cpu
}  // namespace singa

#endif  // SINGA_SRC_CORE_NN_WINOGRAD_CACHE_H_
