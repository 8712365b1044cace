// Rearranged weights kept between calls (see weight_cache.h).
//
// An entry is found by where the weights are and what was made of them
// (pointer, K, C, flip, form), and trusted only while the weights' block
// still has the stamp it had when the entry was made: a changed stamp means
// the block has been written since (or is another block on reused memory),
// and the entry's buffer is filled again in place. An entry without a
// buffer only remembers that a kSecondCall form was asked for.
//
// When a new buffer does not fit, least recently used buffers go, but only
// those not used within the last two rounds of calls (a round: as many
// calls as there are entries). A network whose weights need more than the
// bound then keeps the buffers it made first and does without the rest,
// where evicting the least recently used one would, calling its layers in
// the same order every time, miss on every call. Buffers of freed or
// forgotten weights age and go.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <vector>

#include "weight_cache.h"

namespace singa {
namespace cpu {

namespace {

size_t InitialBound() {
  for (const char* name : {"SINGA_WEIGHT_CACHE_MB", "SINGA_WINOGRAD_CACHE_MB"}) {
    const char* env = std::getenv(name);
    if (env && *env) {
      char* end = nullptr;
      const unsigned long mb = std::strtoul(env, &end, 10);
      if (end && *end == '\0') return size_t(mb) << 20;
    }
  }
  return size_t(64) << 20;
}

// Entries without a buffer beyond this many are dropped, oldest first.
constexpr size_t kMaxMarks = 1024;

struct Entry {
  WeightKey key;
  std::shared_ptr<float> buf;  // null: only a mark (Fill::kSecondCall)
  size_t floats;
  uint64_t used;  // the cache's clock at the last call that asked for it
};

struct Cache {
  std::mutex mu;
  std::vector<Entry> entries;
  size_t bytes = 0;
  size_t bound = InitialBound();
  uint64_t clock = 0;
  WeightCacheStats stats{};

  void Erase(std::vector<Entry>::iterator it) {
    if (it->buf) bytes -= it->floats * sizeof(float);
    entries.erase(it);
  }

  // The least recently used entry with (or without) a buffer, or end().
  std::vector<Entry>::iterator Oldest(bool with_buffer) {
    auto best = entries.end();
    for (auto it = entries.begin(); it != entries.end(); ++it)
      if (bool(it->buf) == with_buffer && (best == entries.end() || it->used < best->used))
        best = it;
    return best;
  }

  // Drops buffers not used within two rounds, oldest first, until `extra`
  // more bytes fit; false when they do not.
  bool MakeRoom(size_t extra) {
    while (bytes + extra > bound) {
      auto lru = Oldest(true);
      if (lru == entries.end() || clock - lru->used <= 2 * entries.size()) return false;
      Erase(lru);
    }
    return true;
  }

  void Mark(const WeightKey& key, size_t floats) {
    size_t marks = 0;
    for (const Entry& e : entries) marks += !e.buf;
    if (marks >= kMaxMarks) Erase(Oldest(false));
    entries.push_back(Entry{key, nullptr, floats, clock});
  }
};

Cache& TheCache() {
  static Cache* cache = new Cache;  // never destroyed: used at exit
  return *cache;
}

bool SameSlot(const WeightKey& a, const WeightKey& b) {
  return a.w == b.w && a.K == b.K && a.C == b.C && a.flip == b.flip &&
         a.form == b.form && a.isa == b.isa;
}

std::shared_ptr<float> Allocate(size_t floats) {
  const size_t bytes = (floats * sizeof(float) + 63) / 64 * 64;
  float* p = static_cast<float*>(std::aligned_alloc(64, bytes));
  if (!p) throw std::bad_alloc();
  return std::shared_ptr<float>(p, std::free);
}

}  // namespace

std::shared_ptr<const float> CachedWeights(const WeightKey& key, size_t floats,
                                           const std::function<void(float*)>& fill,
                                           Fill when) {
  Cache& c = TheCache();
  std::shared_ptr<float> buf;
  {
    std::lock_guard<std::mutex> lock(c.mu);
    if (key.stamp == 0 || floats * sizeof(float) > c.bound) return nullptr;
    ++c.clock;
    auto it = std::find_if(c.entries.begin(), c.entries.end(), [&](const Entry& e) {
      return SameSlot(e.key, key) && e.floats == floats;
    });
    const bool same = it != c.entries.end() && it->key.stamp == key.stamp;
    if (same && it->buf) {
      it->used = c.clock;
      ++c.stats.hits;
      return it->buf;
    }
    ++c.stats.misses;
    if (when == Fill::kSecondCall && !same) {
      // Not asked for with this stamp before: only remembered.
      if (it != c.entries.end()) c.Erase(it);
      c.Mark(key, floats);
      return nullptr;
    }
    if (it != c.entries.end()) {
      // Stale, or a mark: a stale buffer is reused unless a call still
      // reads it.
      std::shared_ptr<float> old = it->buf;
      c.Erase(it);
      if (old && old.use_count() == 1) buf = std::move(old);
    }
    if (!c.MakeRoom(floats * sizeof(float))) return nullptr;
  }
  if (!buf) buf = Allocate(floats);
  fill(buf.get());
  std::lock_guard<std::mutex> lock(c.mu);
  // Another thread may have filled the same slot meanwhile: the newer
  // entry replaces it.
  auto it = std::find_if(c.entries.begin(), c.entries.end(),
                         [&](const Entry& e) { return SameSlot(e.key, key); });
  if (it != c.entries.end()) c.Erase(it);
  if (!c.MakeRoom(floats * sizeof(float))) return buf;  // for this call only
  c.entries.push_back(Entry{key, buf, floats, c.clock});
  c.bytes += floats * sizeof(float);
  return buf;
}

WeightCacheStats GetWeightCacheStats() {
  Cache& c = TheCache();
  std::lock_guard<std::mutex> lock(c.mu);
  WeightCacheStats s = c.stats;
  s.entries = 0;
  for (const Entry& e : c.entries) s.entries += bool(e.buf);
  s.bytes = c.bytes;
  return s;
}

void SetWeightCacheBytes(size_t bytes) {
  Cache& c = TheCache();
  std::lock_guard<std::mutex> lock(c.mu);
  c.bound = bytes;
  for (auto it = c.Oldest(true); c.bytes > c.bound && it != c.entries.end();
       it = c.Oldest(true))
    c.Erase(it);
}

void ClearWeightCache() {
  Cache& c = TheCache();
  std::lock_guard<std::mutex> lock(c.mu);
  c.entries.clear();
  c.bytes = 0;
  c.stats = WeightCacheStats{};
}

}  // namespace cpu
}  // namespace singa
