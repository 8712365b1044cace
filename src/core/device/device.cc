#include "singa/core/device.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <iostream>
#include <limits>

#include <sys/mman.h>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#ifdef _OPENMP
#include <omp.h>
#endif

#include "singa/core/blas.h"
#include "singa/core/graph.h"

namespace singa {

namespace {
// Above this, set_num_threads is surely a mistake.
constexpr int kMaxThreads = 4096;
}  // namespace

size_t Product(const Shape& shape) {
  // An empty dimension empties the shape, however large the others are.
  for (size_t d : shape)
    if (d == 0) return 0;
  size_t n = 1;
  for (size_t d : shape) {
    if (d != 0 && n > std::numeric_limits<size_t>::max() / 4 / d)
      SINGA_THROW(MemoryError, "shape ", shape, " has too many elements");
    n *= d;
  }
  return n;
}

Strides ContiguousStrides(const Shape& shape) {
  Strides s(shape.size());
  int64_t acc = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    s[i] = acc;
    acc *= static_cast<int64_t>(shape[i] ? shape[i] : 1);
  }
  return s;
}

namespace {
// Starts at 1: stamp 0 means "not tracked".
std::atomic<uint64_t> next_block_stamp{1};
}  // namespace

uint64_t Block::NewStamp() {
  return next_block_stamp.fetch_add(1, std::memory_order_relaxed);
}

Block::~Block() {
  if (data_ && owned_ && device_) device_->FreeBlock(data_, size_);
}

void Block::Allocate() const { data_ = device_->AllocBlock(size_); }

void Block::Release() {
  if (data_ && owned_) device_->FreeBlock(data_, size_);
  data_ = nullptr;
  owned_ = true;
  Touch();
}

// Host ids are negative (-1 the default device), CUDA ids the ordinal.
Device::Device(int id) : id_(id) {
  ctx_.random_generator.seed(static_cast<unsigned>(id < 0 ? -id : id + 1));
}

Device::~Device() = default;

std::shared_ptr<Block> Device::NewBlock(size_t size) {
  return std::make_shared<Block>(size, shared_from_this());
}

void* Device::AllocBlock(size_t size) {
  void* ptr = Malloc(size);
  if (ptr == nullptr && size > 0)
    SINGA_THROW(MemoryError, "cannot allocate ", size, " bytes on ", name());
  const size_t now = allocated_ += size;
  size_t peak = peak_.load();
  while (now > peak && !peak_.compare_exchange_weak(peak, now)) {
  }
  return ptr;
}

void Device::FreeBlock(void* ptr, size_t size) noexcept {
  try {
    Free(ptr, size);
  } catch (...) {
  }
  allocated_ -= size;
}

MemStats Device::GetMemStats() const {
  MemStats s;
  s.allocated = allocated_.load();
  s.peak = peak_.load();
  s.cached = CachedBytes();
  return s;
}

void Device::ResetPeakMemory() { peak_ = allocated_.load(); }

void Device::Exec(std::function<void(Context*)> fn, const std::vector<Block*>& read_blocks,
                  const std::vector<Block*>& write_blocks) {
  if (recording_) {
    graph_->AddOp(std::move(fn), read_blocks, write_blocks);
    return;
  }
  fn(&ctx_);
}

void Device::EnableGraph(bool enable) {
  if (enable && !graph_) {
    graph_ = std::make_shared<Graph>(this);
    graph_->set_verbosity(verbosity_);
    graph_->set_skip(skip_);
    graph_->set_recompute_budget(recompute_budget_);
  }
  recording_ = enable;
}

void Device::RunGraph(bool serial) {
  SINGA_CHECK(!recording_, GraphError, "RunGraph: ", name(),
              " is still recording; call EnableGraph(False) before running the graph");
  if (graph_) graph_->Run(&ctx_, serial);
}

void Device::ResetGraph() {
  graph_.reset();
  if (recording_) EnableGraph(true);
}

uint64_t Device::graph_id() const { return graph_ ? graph_->id() : 0; }

void Device::AttachGraph(std::shared_ptr<Graph> graph) {
  SINGA_CHECK(!recording_, GraphError, "AttachGraph: ", name(),
              " is recording; call EnableGraph(False) first");
  SINGA_CHECK(!graph || graph->device() == this, DeviceError,
              "AttachGraph: the graph was recorded on another device than ", name());
  graph_ = std::move(graph);
  if (graph_) {
    graph_->set_verbosity(verbosity_);
    graph_->set_skip(skip_);
  }
}

void Device::SetVerbosity(int verbosity) {
  SINGA_CHECK(verbosity >= 0, ValueError, "SetVerbosity: verbosity must be >= 0, got ",
              verbosity);
  verbosity_ = verbosity;
  if (graph_) graph_->set_verbosity(verbosity);
}

void Device::SetSkipIteration(int skip) {
  SINGA_CHECK(skip >= 0, ValueError, "SetSkipIteration: need a count >= 0, got ", skip);
  skip_ = skip;
  if (graph_) graph_->set_skip(skip);
}

void Device::SetRecomputeBudget(double share) {
  SINGA_CHECK(share >= 0 && share <= 1, ValueError,
              "SetRecomputeBudget: need a share of the run time in [0, 1], got ", share);
  recompute_budget_ = share;
  if (graph_) graph_->set_recompute_budget(share);
}

std::string Device::TimeProfiling() const {
  return graph_ ? graph_->Profile() : "graph: nothing recorded on " + name() + "\n";
}

void Device::PrintTimeProfiling() const { std::cout << TimeProfiling() << std::flush; }

std::string Device::name() const {
  // SINGA's ids: -1 for the default host device, -2, -3, ... for others.
  return id_ == -1 ? "cpu" : "cpu:" + std::to_string(-1 - id_);
}

void Device::CheckHostRead(const char* op) const {
  SINGA_CHECK(!recording_, GraphError, op, ": cannot read tensor values on the host while ",
              name(), " records a graph (the value would be the recording run's only); "
              "read it after the step, or run this step eagerly");
}

namespace {
// Id -1 belongs to the default device; CUDA devices use their ordinals.
std::atomic<int> next_cpu_id{-2};

// Buffers under kLargeBuffer (below) come from malloc. With glibc's defaults
// such a buffer is mmapped (from 128 KiB on) and unmapped at free, or the
// heap is trimmed once its free top passes a threshold that those frees keep
// moving, so a training step that frees and reallocates a few MiB of
// activations page faults on each of them (about a fifth of a LeNet step at
// batch 64). Fixing both thresholds at the upper bounds glibc's own
// adjustment would reach keeps that memory in the heap for reuse; buffers
// of 32 MiB and more are still mmapped.
void KeepHeapForReuse() {
#if defined(__GLIBC__)
  static const bool done = [] {
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 64 << 20);
    return true;
  }();
  (void)done;
#endif
}
}  // namespace

CppCPU::CppCPU() : Device(next_cpu_id--) { KeepHeapForReuse(); }
CppCPU::CppCPU(int id) : Device(id) { KeepHeapForReuse(); }

void CppCPU::CopyDataToFrom(void* dst, const void* src, size_t nbytes,
                            CopyDirection) {
  if (nbytes) std::memcpy(dst, src, nbytes);
}

namespace {
constexpr size_t kHugePage = size_t(2) << 20;
// Buffers from this size on are 2 MiB aligned, huge-page advised and cached.
constexpr size_t kLargeBuffer = 2 * kHugePage;
// Upper bound on the bytes the cache may hold.
constexpr size_t kCacheLimit = size_t(512) << 20;
// Start offsets of large buffers cycle through kColours steps of 5 lines.
constexpr size_t kColours = 16;
constexpr size_t kColourStep = 320;

size_t RoundLarge(size_t size) { return (size + kHugePage - 1) / kHugePage * kHugePage; }

// Buffers from kMidBuffer up to kLargeBuffer are kept too, by their size
// rounded to a cache line, and handed out last freed first: an op's output
// then lands in memory the previous op's output or input has just left in
// cache, where glibc's bins would often pick a chunk freed long before
// (from L3 or memory, so every store first reads its line). ResNet-18's
// batch-1 forward took 0.97-0.98x the time at two threads (Zen 5,
// alternating forward by forward in one process). Up to kMidLimit bytes;
// past it a freed buffer goes back to malloc.
constexpr size_t kMidBuffer = size_t(4) << 10;
constexpr size_t kMidLimit = size_t(64) << 20;
size_t RoundMid(size_t size) { return (size + 63) / 64 * 64; }
}  // namespace

void* CppCPU::TakeKept(size_t rounded, bool mid) {
  std::lock_guard<std::mutex> lock(cache_mutex_);
  auto it = cache_.find(rounded);
  if (it == cache_.end() || it->second.empty()) return nullptr;
  void* ptr = it->second.back();
  it->second.pop_back();
  cached_bytes_ -= rounded;
  if (mid) mid_bytes_ -= rounded;
  return ptr;
}

bool CppCPU::Keep(void* ptr, size_t rounded, bool mid) {
  std::lock_guard<std::mutex> lock(cache_mutex_);
  if (mid ? mid_bytes_ + rounded > kMidLimit : cached_bytes_ + rounded > kCacheLimit)
    return false;
  // Free runs in ~Block, so nothing may escape: if the cache cannot grow to
  // hold the buffer, the caller releases it instead.
  try {
    cache_[rounded].push_back(ptr);
  } catch (...) {
    return false;
  }
  cached_bytes_ += rounded;
  if (mid) mid_bytes_ += rounded;
  return true;
}

void* CppCPU::Malloc(size_t size) {
  if (size == 0) return nullptr;
  if (size >= kLargeBuffer) {
    // Large buffers start at a rotating offset ("colour") past their 2 MiB
    // boundary: operands that all began on the boundary would contend for
    // the same cache sets and alias each other in the load/store queues.
    const size_t colour = (next_colour_++ % kColours) * kColourStep;
    const size_t rounded = RoundLarge(size + kColours * kColourStep);
    void* base = TakeKept(rounded, false);
    if (!base) {
      base = std::aligned_alloc(kHugePage, rounded);
      if (!base) return nullptr;
#ifdef MADV_HUGEPAGE
      madvise(base, rounded, MADV_HUGEPAGE);
#endif
    }
    return static_cast<char*>(base) + colour;
  }
  // 64-byte alignment lets AVX-512 loads start on a cache line.
  const size_t rounded = RoundMid(size);
  if (size >= kMidBuffer)
    if (void* ptr = TakeKept(rounded, true)) return ptr;
  return std::aligned_alloc(64, rounded);
}

size_t CppCPU::CachedBytes() const {
  std::lock_guard<std::mutex> lock(cache_mutex_);
  return cached_bytes_;
}

void CppCPU::Free(void* ptr, size_t size) {
  if (size >= kLargeBuffer) {
    const size_t rounded = RoundLarge(size + kColours * kColourStep);
    void* base = reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(ptr) & ~(kHugePage - 1));
    if (!Keep(base, rounded, false)) std::free(base);
    return;
  }
  if (size >= kMidBuffer && Keep(ptr, RoundMid(size), true)) return;
  std::free(ptr);
}

CppCPU::~CppCPU() {
  for (auto& kv : cache_)
    for (void* p : kv.second) std::free(p);
}

std::shared_ptr<Device> DefaultDevice() {
  static std::shared_ptr<Device> dev = [] {
    // One thread pool: OpenBLAS runs its jobs on the OpenMP team.
    UseOpenMPForBlas();
    return std::make_shared<CppCPU>(-1);
  }();
  return dev;
}

void SetNumThreads(int n) {
  SINGA_CHECK(n >= 1, ValueError, "set_num_threads: need at least 1 thread, got ", n);
  SINGA_CHECK(n <= kMaxThreads, ValueError, "set_num_threads: ", n,
              " threads is more than the ", kMaxThreads, " supported");
#ifdef _OPENMP
  // More threads than processors only adds switching (and a runaway count
  // would have OpenMP reserve a stack for each), so use what the machine has.
  n = std::min(n, omp_get_num_procs());
  omp_set_num_threads(n);
#endif
  SetBlasThreads(n);
}

int GetNumThreads() {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

#ifndef USE_CUDA
bool HasCuda() { return false; }
int GetNumGPUs() { return 0; }
std::shared_ptr<Device> CreateCudaGPU(int id) {
  SINGA_THROW(DeviceError, "cannot create cuda:", id,
              ": this singa build has no CUDA support (rebuild with USE_CUDA=ON)");
}
std::string DeviceQuery(int id) {
  SINGA_THROW(DeviceError, "cannot query cuda:", id,
              ": this singa build has no CUDA support (rebuild with USE_CUDA=ON)");
}
std::vector<size_t> GetGPUMemSize(int id) {
  SINGA_THROW(DeviceError, "cannot query cuda:", id,
              ": this singa build has no CUDA support (rebuild with USE_CUDA=ON)");
}
void SetAllowTF32(const std::shared_ptr<Device>& dev, bool) {
  SINGA_THROW(DeviceError, "set_allow_tf32: ", dev ? dev->name() : "None",
              " is not a CUDA device (this singa build has no CUDA support)");
}
bool GetAllowTF32(const std::shared_ptr<Device>&) { return false; }
#endif

}  // namespace singa
