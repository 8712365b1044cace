// Transformed Winograd weights kept between calls (see winograd.h).
//
// An entry is found by where the weights are and what was made of them
// (pointer, K, C, flip, tile), and trusted only while the weights' block still
// has the stamp it had when the entry was made: a changed stamp means the
// block has been written since (or is another block on reused memory), and
// the entry's buffer is transformed again in place. The buffers of entries
// nobody finds any more (blocks freed, weights moved) go when the total
// passes the bound, least recently used first.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <vector>

#include "winograd_cache.h"

namespace singa {
namespace cpu {

namespace {

size_t InitialBound() {
  const char* env = std::getenv("SINGA_WINOGRAD_CACHE_MB");
  if (env && *env) {
    char* end = nullptr;
    const unsigned long mb = std::strtoul(env, &end, 10);
    if (end && *end == '\0') return size_t(mb) << 20;
  }
  return size_t(32) << 20;
}

struct Entry {
  WinoWeightKey key;
  std::shared_ptr<float> U;
  size_t floats;
  uint64_t used;  // the cache's clock at the last hit or fill
};

struct Cache {
  std::mutex mu;
  std::vector<Entry> entries;
  size_t bytes = 0;
  size_t bound = InitialBound();
  uint64_t clock = 0;
  WinogradCacheStats stats{};

  // Drops least recently used entries until `extra` more bytes fit.
  void MakeRoom(size_t extra) {
    while (!entries.empty() && bytes + extra > bound) {
      auto lru = std::min_element(entries.begin(), entries.end(),
                                  [](const Entry& a, const Entry& b) {
                                    return a.used < b.used;
                                  });
      bytes -= lru->floats * sizeof(float);
      entries.erase(lru);
    }
  }
};

Cache& TheCache() {
  static Cache* cache = new Cache;  // never destroyed: used at exit
  return *cache;
}

bool SameSlot(const WinoWeightKey& a, const WinoWeightKey& b) {
  return a.w == b.w && a.K == b.K && a.C == b.C && a.flip == b.flip &&
         a.tile == b.tile && a.isa == b.isa;
}

std::shared_ptr<float> Allocate(size_t floats) {
  const size_t bytes = (floats * sizeof(float) + 63) / 64 * 64;
  float* p = static_cast<float*>(std::aligned_alloc(64, bytes));
  if (!p) throw std::bad_alloc();
  return std::shared_ptr<float>(p, std::free);
}

}  // namespace

std::shared_ptr<const float> CachedWinoWeights(
    const WinoWeightKey& key, size_t floats,
    const std::function<void(float*)>& fill) {
  Cache& c = TheCache();
  std::shared_ptr<float> buf;
  {
    std::lock_guard<std::mutex> lock(c.mu);
    if (key.stamp == 0 || floats * sizeof(float) > c.bound) return nullptr;
    for (auto it = c.entries.begin(); it != c.entries.end(); ++it) {
      if (!SameSlot(it->key, key) || it->floats != floats) continue;
      if (it->key.stamp == key.stamp) {
        it->used = ++c.clock;
        ++c.stats.hits;
        return it->U;
      }
      // Stale: its buffer is reused unless a call still reads it.
      if (it->U.use_count() == 1) buf = std::move(it->U);
      c.bytes -= it->floats * sizeof(float);
      c.entries.erase(it);
      break;
    }
    ++c.stats.misses;
  }
  if (!buf) buf = Allocate(floats);
  fill(buf.get());
  std::lock_guard<std::mutex> lock(c.mu);
  // Another thread may have filled the same slot meanwhile: the newer
  // entry replaces it.
  for (auto it = c.entries.begin(); it != c.entries.end(); ++it)
    if (SameSlot(it->key, key)) {
      c.bytes -= it->floats * sizeof(float);
      c.entries.erase(it);
      break;
    }
  c.MakeRoom(floats * sizeof(float));
  c.entries.push_back(Entry{key, buf, floats, ++c.clock});
  c.bytes += floats * sizeof(float);
  return buf;
}

WinogradCacheStats GetWinogradCacheStats() {
  Cache& c = TheCache();
  std::lock_guard<std::mutex> lock(c.mu);
  WinogradCacheStats s = c.stats;
  s.entries = c.entries.size();
  s.bytes = c.bytes;
  return s;
}

void SetWinogradCacheBytes(size_t bytes) {
  Cache& c = TheCache();
  std::lock_guard<std::mutex> lock(c.mu);
  c.bound = bytes;
  c.MakeRoom(0);
}

void ClearWinogradCache() {
  Cache& c = TheCache();
  std::lock_guard<std::mutex> lock(c.mu);
  c.entries.clear();
  c.bytes = 0;
  c.stats = WinogradCacheStats{};
}

}  // namespace cpu
}  // namespace singa
