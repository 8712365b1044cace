// The NCCL Communicator (include/singa/dist/communicator.h).
//
// Buffers are singa Tensors on the communicator's GPU, so they come from
// the device's caching allocator and dtype conversion (float32 <-> float16)
// and packing are the core's copies, queued on the same stream as NCCL.
#include "singa/dist/communicator.h"

#include <cub/device/device_radix_sort.cuh>
#include <nccl.h>

#include <algorithm>
#include <climits>
#include <cstring>

#include "device/cuda_gpu.h"
#include "singa/core/error.h"

namespace singa {
namespace {

static_assert(sizeof(ncclUniqueId) == NcclIdHolder::kBytes, "NCCL_UNIQUE_ID_BYTES changed");

[[noreturn]] void ThrowNccl(const char* call, ncclResult_t r, ncclComm_t comm) {
  const char* last = ncclGetLastError(comm);
  SINGA_THROW(CudaError, call, " failed: ", ncclGetErrorString(r),
              (last && *last) ? std::string(" (") + last + ")" : std::string());
}

#define SINGA_NCCL_CHECK(call, comm)                                  \
  do {                                                                \
    const ncclResult_t singa_nr_ = (call);                            \
    if (singa_nr_ != ncclSuccess) ThrowNccl(#call, singa_nr_, comm);  \
  } while (0)

ncclDataType_t NcclType(DataType t) {
  switch (t) {
    case kFloat32:
      return ncclFloat32;
    case kFloat16:
      return ncclFloat16;
    default:
      return ncclInt32;
  }
}

const char* DtypeName(DataType t) {
  switch (t) {
    case kFloat32:
      return "float32";
    case kFloat16:
      return "float16";
    default:
      return "int32";
  }
}

constexpr int kThreads = 256;

// |g + a| for the top-K threshold.
__global__ void Magnitude(int n, const float* g, const float* a, float* mag) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    mag[i] = fabsf(g[i] + (a ? a[i] : 0.f));
}

// How many magnitudes are above the k-th largest (*kth).
__global__ void CountAbove(int n, const float* mag, const float* kth, int* count) {
  const float t = *kth;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    if (mag[i] > t) atomicAdd(count, 1);
}

// Picks the entries to send into (idx, val)[0, *picked). topK: those above
// *kth and, of those equal to it, as many as make k; otherwise those with
// magnitude >= thr. The residual a keeps what is not sent.
__global__ void Select(int n, const float* g, float* a, bool topk, float thr, const float* kth,
                       int k, const int* above, int* ties, int* picked, int* idx, float* val) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    const float v = g[i] + (a ? a[i] : 0.f);
    const float m = fabsf(v);
    bool take;
    if (topk) {
      const float t = *kth;
      take = m > t || (m == t && atomicAdd(ties, 1) < k - *above);
    } else {
      take = m >= thr;
    }
    if (take) {
      const int p = atomicAdd(picked, 1);
      idx[p] = i;
      val[p] = v;
    }
    if (a) a[i] = take ? 0.f : v;
  }
}

// g[idx[j]] += val[j]: one rank's entries, whose indices are distinct.
__global__ void ScatterAdd(int m, const int* idx, const float* val, float* g) {
  for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < m; j += gridDim.x * blockDim.x)
    g[idx[j]] += val[j];
}

// Tensors packed into fused buffers of limit elements each; buffers are
// kept across steps.
struct Fuser {
  struct Packed {
    Tensor t;
    size_t buf, off, n;
  };
  DataType dtype = kFloat32;
  std::vector<Tensor> buffers;
  std::vector<Packed> packed;
  size_t cur = 0, off = 0;
  void Reset() {
    packed.clear();
    cur = off = 0;
  }
};

}  // namespace

struct Communicator::Impl {
  ncclComm_t comm = nullptr;
  std::shared_ptr<Device> dev;
  cudaStream_t stream = nullptr;
  Fuser fused, fused_half;

  void AllReduce(Tensor& c) {
    if (c.Size() == 0) return;
    stream = cuda::Stream(dev->context());
    SINGA_NCCL_CHECK(ncclAllReduce(c.raw_data(), c.mutable_raw_data(), c.Size(),
                                   NcclType(c.data_type()), ncclSum, comm, stream),
                     comm);
  }
  Tensor Scratch(size_t n, DataType dtype) { return Tensor(Shape{std::max<size_t>(n, 1)}, dev, dtype); }
  void Flush(Fuser& f) {
    if (f.off) {
      Tensor part = f.buffers[f.cur].Slice(0, 0, f.off);
      AllReduce(part);
    }
  }
  void Add(Fuser& f, const Tensor& t, size_t limit) {
    const size_t n = t.Size();
    if (f.off + n > limit) {
      Flush(f);
      ++f.cur;
      f.off = 0;
    }
    while (f.buffers.size() <= f.cur) f.buffers.push_back(Tensor(Shape{limit}, dev, f.dtype));
    f.buffers[f.cur].Slice(0, f.off, f.off + n).CopyData(t);
    f.packed.push_back({t, f.cur, f.off, n});
    f.off += n;
  }
};

NcclIdHolder::NcclIdHolder() {
  ncclUniqueId uid;
  SINGA_NCCL_CHECK(ncclGetUniqueId(&uid), nullptr);
  std::memcpy(id.data(), &uid, kBytes);
}

NcclIdHolder::NcclIdHolder(const std::string& bytes) {
  SINGA_CHECK(bytes.size() == kBytes, ValueError, "NcclIdHolder: an NCCL id has ", kBytes,
              " bytes, got ", bytes.size());
  std::memcpy(id.data(), bytes.data(), kBytes);
}

Communicator::Communicator(int limit) {
  (void)limit;
  SINGA_THROW(DeviceError,
              "Communicator(limit) bootstraps NCCL over MPI, which singa does in Python: use "
              "opt.DistOpt under mpiexec, or Communicator(local_rank, world_size, "
              "NcclIdHolder, limit) with an NcclIdHolder shared by every process");
}

Communicator::Communicator(int local_rank, int world_size, const NcclIdHolder& holder,
                           int limit) {
  Init(local_rank, world_size, holder, limit, local_rank);
}

Communicator::Communicator(int global_rank, int world_size, const NcclIdHolder& holder,
                           int limit, int device_id) {
  Init(global_rank, world_size, holder, limit, device_id);
}

void Communicator::Init(int rank, int world_size, const NcclIdHolder& holder, int limit,
                        int device_id) {
  SINGA_CHECK(world_size >= 1 && rank >= 0 && rank < world_size, ValueError,
              "Communicator: rank ", rank, " is not in [0, world_size) for world_size ",
              world_size);
  SINGA_CHECK(limit > 0, ValueError, "Communicator: the fused buffer size (limit) must be a "
              "positive number of elements, got ", limit);
  SINGA_CHECK(device_id >= 0, ValueError, "Communicator: GPU ", device_id,
              " is not a CUDA device ordinal");
  global_rank_ = rank;
  world_size_ = world_size;
  device_id_ = device_id;
  limit_ = limit;
  impl_ = std::make_unique<Impl>();
  impl_->dev = CreateCudaGPU(device_id);  // DeviceError without that GPU
  impl_->stream = cuda::Stream(impl_->dev->context());
  impl_->fused.dtype = kFloat32;
  impl_->fused_half.dtype = kFloat16;
  ncclUniqueId uid;
  std::memcpy(&uid, holder.id.data(), NcclIdHolder::kBytes);
  SINGA_NCCL_CHECK(ncclCommInitRank(&impl_->comm, world_size, uid, rank), nullptr);
}

Communicator::~Communicator() {
  if (impl_ && impl_->comm) {
    // Queued collectives finish before the communicator goes.
    cudaStreamSynchronize(impl_->stream);
    ncclCommDestroy(impl_->comm);
  }
}

Tensor Communicator::Check(const Tensor& t, const char* where, bool float32_only) const {
  SINGA_CHECK(!t.empty(), ValueError, where, ": the tensor has no storage");
  auto dev = t.device();
  SINGA_CHECK(dev && !dev->is_host() && dev->id() == device_id_, DeviceError, where,
              ": the tensor is on ", dev ? dev->name() : std::string("no device"),
              " but this NCCL communicator (rank ", global_rank_, ") works on cuda:",
              device_id_);
  if (float32_only)
    SINGA_CHECK(t.data_type() == kFloat32, DtypeError, where, ": expected a float32 tensor, got ",
                DtypeName(t.data_type()), " of shape ", t.shape());
  return t;
}

void Communicator::synch(Tensor& t) {
  Check(t, "synch", false);
  if (t.IsContiguous()) {
    impl_->AllReduce(t);
  } else {
    Tensor tmp = t.Contiguous();
    impl_->AllReduce(tmp);
    t.CopyData(tmp);
  }
}

void Communicator::synchHalf(Tensor& t) {
  Check(t, "synchHalf", true);
  Tensor half = impl_->Scratch(t.Size(), kFloat16).Slice(0, 0, t.Size());
  half.CopyData(t);
  impl_->AllReduce(half);
  t.CopyData(half);
}

void Communicator::fusedSynch(std::vector<Tensor>& t, bool send) {
  Fused(t, send, false, "fusedSynch");
}

void Communicator::fusedSynchHalf(std::vector<Tensor>& t, bool send) {
  Fused(t, send, true, "fusedSynchHalf");
}

void Communicator::Fused(std::vector<Tensor>& t, bool send, bool half, const char* where) {
  SINGA_CHECK(!t.empty(), ValueError, where, ": the list of tensors is empty");
  for (const Tensor& x : t) {
    Check(x, where, true);
    SINGA_CHECK(x.Size() <= static_cast<size_t>(limit_), ValueError, where, ": a tensor of ",
                x.Size(), " elements (shape ", x.shape(), ") does not fit in a fused buffer of ",
                limit_, " elements; all-reduce it on its own or raise the buffer size");
  }
  Fuser& f = half ? impl_->fused_half : impl_->fused;
  const bool pack_first = !send || f.packed.empty();
  if (!pack_first) {
    bool same = f.packed.size() == t.size();
    for (size_t i = 0; same && i < t.size(); ++i) same = f.packed[i].n == t[i].Size();
    if (!same) {
      std::vector<size_t> had, got;
      for (const auto& p : f.packed) had.push_back(p.n);
      for (const Tensor& x : t) got.push_back(x.Size());
      f.Reset();
      SINGA_THROW(ValueError, where, ": ", had.size(), " tensors of ", had,
                  " elements were packed but the tensors to receive them have ", got,
                  " elements");
    }
  }
  if (pack_first)
    for (const Tensor& x : t) impl_->Add(f, x, static_cast<size_t>(limit_));
  if (!send) return;
  impl_->Flush(f);
  for (size_t i = 0; i < f.packed.size(); ++i) {
    const auto& p = f.packed[i];
    t[i].CopyData(f.buffers[p.buf].Slice(0, p.off, p.off + p.n));
  }
  f.Reset();
}

void Communicator::sparsification(Tensor& t, Tensor& accumulation, float sparsThreshold,
                                  bool topK) {
  Check(t, "sparsification", true);
  Check(accumulation, "sparsification (accumulation)", true);
  SINGA_CHECK(accumulation.Size() == t.Size() && accumulation.IsContiguous(), ValueError,
              "sparsification: the accumulation tensor must be contiguous with ", t.Size(),
              " elements, got shape ", accumulation.shape());
  Tensor flat = t.IsContiguous() ? t : t.Contiguous();
  SparseOne(flat, &accumulation, sparsThreshold, topK, "sparsification");
  if (!t.IsContiguous()) t.CopyData(flat);
}

void Communicator::sparsification(Tensor& t, float sparsThreshold, bool topK) {
  Check(t, "sparsification", true);
  Tensor flat = t.IsContiguous() ? t : t.Contiguous();
  SparseOne(flat, nullptr, sparsThreshold, topK, "sparsification");
  if (!t.IsContiguous()) t.CopyData(flat);
}

void Communicator::fusedSparsification(std::vector<Tensor>& t, Tensor& accumulation,
                                       float sparsThreshold, bool topK) {
  SINGA_CHECK(!t.empty(), ValueError, "fusedSparsification: the list of tensors is empty");
  size_t total = 0;
  for (const Tensor& x : t) total += Check(x, "fusedSparsification", true).Size();
  Check(accumulation, "fusedSparsification (accumulation)", true);
  SINGA_CHECK(accumulation.Size() == total && accumulation.IsContiguous(), ValueError,
              "fusedSparsification: the accumulation tensor must be contiguous with ", total,
              " elements, got shape ", accumulation.shape());
  Tensor flat = impl_->Scratch(total, kFloat32).Slice(0, 0, total);
  size_t off = 0;
  for (const Tensor& x : t) {
    flat.Slice(0, off, off + x.Size()).CopyData(x);
    off += x.Size();
  }
  SparseOne(flat, &accumulation, sparsThreshold, topK, "fusedSparsification");
  off = 0;
  for (Tensor& x : t) {
    x.CopyData(flat.Slice(0, off, off + x.Size()));
    off += x.Size();
  }
}

void Communicator::fusedSparsification(std::vector<Tensor>& t, float sparsThreshold,
                                       bool topK) {
  SINGA_CHECK(!t.empty(), ValueError, "fusedSparsification: the list of tensors is empty");
  size_t total = 0;
  for (const Tensor& x : t) total += Check(x, "fusedSparsification", true).Size();
  Tensor flat = impl_->Scratch(total, kFloat32).Slice(0, 0, total);
  size_t off = 0;
  for (const Tensor& x : t) {
    flat.Slice(0, off, off + x.Size()).CopyData(x);
    off += x.Size();
  }
  SparseOne(flat, nullptr, sparsThreshold, topK, "fusedSparsification");
  off = 0;
  for (Tensor& x : t) {
    x.CopyData(flat.Slice(0, off, off + x.Size()));
    off += x.Size();
  }
}

// Sparse all-reduce of a contiguous float32 tensor: every rank picks its
// entries into (index, value) lists, the lists are all-gathered (padded to
// the longest) and added into the zeroed tensor rank by rank, so the sum
// is the same on every rank and from run to run.
void Communicator::SparseOne(Tensor& flat, Tensor* acc, float spars, bool topK,
                             const char* where) {
  if (topK)
    SINGA_CHECK(spars > 0.f && spars <= 1.f, ValueError, where, ": with topK, sparsThreshold is "
                "the fraction of entries sent and must be in (0, 1], got ", spars);
  else
    SINGA_CHECK(spars >= 0.f, ValueError, where, ": sparsThreshold is the magnitude threshold "
                "and must be >= 0, got ", spars);
  const size_t size = flat.Size();
  SINGA_CHECK(size <= static_cast<size_t>(INT_MAX), ValueError, where, ": ", size,
              " elements are more than the sparse all-reduce's int32 indices can address");
  if (size == 0) return;
  const int n = static_cast<int>(size);
  const int k = std::min(n, std::max(1, static_cast<int>(spars * n)));
  Impl& im = *impl_;
  cudaStream_t s = cuda::Stream(im.dev->context());
  float* g = flat.mutable_data<float>();
  float* a = acc ? acc->mutable_data<float>() : nullptr;
  Tensor counters = im.Scratch(3, kInt);  // above the k-th, ties taken, picked
  int* cnt = counters.mutable_data<int>();
  SINGA_CUDA_CHECK(cudaMemsetAsync(cnt, 0, 3 * sizeof(int), s));
  Tensor idx = im.Scratch(size, kInt), val = im.Scratch(size, kFloat32);
  const unsigned blocks = cuda::Blocks(n, kThreads);
  Tensor sorted;
  const float* kth = nullptr;
  if (topK) {
    Tensor mag = im.Scratch(size, kFloat32);
    sorted = im.Scratch(size, kFloat32);
    Magnitude<<<blocks, kThreads, 0, s>>>(n, g, a, mag.mutable_data<float>());
    SINGA_CUDA_LAUNCHED(Magnitude);
    size_t temp_bytes = 0;
    SINGA_CUDA_CHECK(cub::DeviceRadixSort::SortKeysDescending(
        nullptr, temp_bytes, mag.data<float>(), sorted.mutable_data<float>(), n, 0, 32, s));
    Tensor temp = im.Scratch((temp_bytes + sizeof(int) - 1) / sizeof(int), kInt);
    SINGA_CUDA_CHECK(cub::DeviceRadixSort::SortKeysDescending(
        temp.mutable_raw_data(), temp_bytes, mag.data<float>(), sorted.mutable_data<float>(), n,
        0, 32, s));
    kth = sorted.data<float>() + (k - 1);
    CountAbove<<<blocks, kThreads, 0, s>>>(n, mag.data<float>(), kth, cnt);
    SINGA_CUDA_LAUNCHED(CountAbove);
  }
  Select<<<blocks, kThreads, 0, s>>>(n, g, a, topK, spars, kth, k, cnt, cnt + 1, cnt + 2,
                                     idx.mutable_data<int>(), val.mutable_data<float>());
  SINGA_CUDA_LAUNCHED(Select);
  const int p = world_size_;
  Tensor all_counts = im.Scratch(p, kInt);
  SINGA_NCCL_CHECK(ncclAllGather(cnt + 2, all_counts.mutable_data<int>(), 1, ncclInt32, im.comm,
                                 s),
                   im.comm);
  std::vector<int> counts(p);
  SINGA_CUDA_CHECK(cudaMemcpyAsync(counts.data(), all_counts.data<int>(), p * sizeof(int),
                                   cudaMemcpyDeviceToHost, s));
  SINGA_CUDA_CHECK(cudaStreamSynchronize(s));
  const int most = *std::max_element(counts.begin(), counts.end());
  SINGA_CUDA_CHECK(cudaMemsetAsync(g, 0, size * sizeof(float), s));
  if (most == 0) return;
  Tensor all_idx = im.Scratch(static_cast<size_t>(p) * most, kInt);
  Tensor all_val = im.Scratch(static_cast<size_t>(p) * most, kFloat32);
  SINGA_NCCL_CHECK(ncclGroupStart(), im.comm);
  SINGA_NCCL_CHECK(ncclAllGather(idx.data<int>(), all_idx.mutable_data<int>(), most, ncclInt32,
                                 im.comm, s),
                   im.comm);
  SINGA_NCCL_CHECK(ncclAllGather(val.data<float>(), all_val.mutable_data<float>(), most,
                                 ncclFloat32, im.comm, s),
                   im.comm);
  SINGA_NCCL_CHECK(ncclGroupEnd(), im.comm);
  for (int r = 0; r < p; ++r) {
    if (counts[r] == 0) continue;
    ScatterAdd<<<cuda::Blocks(counts[r], kThreads), kThreads, 0, s>>>(
        counts[r], all_idx.data<int>() + static_cast<size_t>(r) * most,
        all_val.data<float>() + static_cast<size_t>(r) * most, g);
    SINGA_CUDA_LAUNCHED(ScatterAdd);
  }
}

void Communicator::wait() {
  ncclResult_t async = ncclSuccess;
  SINGA_NCCL_CHECK(ncclCommGetAsyncError(impl_->comm, &async), impl_->comm);
  if (async != ncclSuccess) ThrowNccl("a queued NCCL collective", async, impl_->comm);
}

}  // namespace singa
