// NCCL collectives on GPU tensors, under the names of SINGA's
// singa_wrap.Communicator and NcclIdHolder (built when the CUDA build finds
// NCCL: USE_DIST). opt.DistOpt drives it for parameters on a CUDA device.
//
// All work is queued on the GPU's one stream (the stream singa's kernels
// use), so a collective is ordered after the backward kernels that made its
// gradients and before the update kernels that read the sums without any
// event or host wait. Arguments are checked before anything is queued; a
// failed CUDA or NCCL call throws CudaError (RuntimeError in Python) naming
// the call and the library's error string.
//
// This header needs no CUDA or NCCL headers: the NCCL state is private to
// src/dist/communicator.cu.
#ifndef SINGA_DIST_COMMUNICATOR_H_
#define SINGA_DIST_COMMUNICATOR_H_

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "singa/core/tensor.h"

namespace singa {

// An ncclUniqueId: made by one process (ncclGetUniqueId) and given to every
// process of the job, which then join one NCCL communicator with it.
class NcclIdHolder {
 public:
  static constexpr size_t kBytes = 128;  // NCCL_UNIQUE_ID_BYTES
  NcclIdHolder();
  // From the bytes of another process's id (ValueError unless 128 bytes).
  explicit NcclIdHolder(const std::string& bytes);
  std::string bytes() const { return std::string(id.data(), id.size()); }
  std::array<char, kBytes> id;
};

class Communicator {
 public:
  // SINGA's MPI-bootstrapped form; singa bootstraps over MPI from Python
  // (opt.DistOpt), so this throws DeviceError saying which forms to use.
  explicit Communicator(int limit);
  // Rank local_rank of world_size processes, on GPU local_rank (SINGA's
  // multiprocessing form). limit: elements per fused buffer.
  Communicator(int local_rank, int world_size, const NcclIdHolder& holder, int limit);
  // Rank global_rank on GPU device_id (several hosts: opt.DistOpt's MPI
  // bootstrap passes the rank on this host as device_id).
  Communicator(int global_rank, int world_size, const NcclIdHolder& holder, int limit,
               int device_id);
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  // Sums t (float32, float16 or int32) over all ranks, in place.
  void synch(Tensor& t);
  // send=false packs float32 tensors into the fused buffers (a full buffer
  // is all-reduced at once); send=true all-reduces what was packed and
  // writes the sums into t (which must match what was packed), or, with
  // nothing packed, packs t and sends it.
  void fusedSynch(std::vector<Tensor>& t, bool send = true);
  // synch and fusedSynch of float32 tensors sending float16.
  void synchHalf(Tensor& t);
  void fusedSynchHalf(std::vector<Tensor>& t, bool send = true);
  // Sums a sparsified t over the ranks, in place: each rank sends its top
  // sparsThreshold fraction of entries by magnitude (topK) or those of
  // magnitude >= sparsThreshold. accumulation is added first and keeps what
  // was not sent.
  void sparsification(Tensor& t, Tensor& accumulation, float sparsThreshold, bool topK);
  void sparsification(Tensor& t, float sparsThreshold, bool topK);
  // sparsification over the concatenation of t, written back into each.
  void fusedSparsification(std::vector<Tensor>& t, Tensor& accumulation, float sparsThreshold,
                           bool topK);
  void fusedSparsification(std::vector<Tensor>& t, float sparsThreshold, bool topK);
  // Collectives are ordered on the stream already; wait() reports an
  // asynchronous NCCL failure (a rank that went away) as CudaError.
  void wait();

  int global_rank() const { return global_rank_; }
  int world_size() const { return world_size_; }
  int device_id() const { return device_id_; }
  int limit() const { return limit_; }

  struct Impl;

 private:
  void Init(int rank, int world_size, const NcclIdHolder& holder, int limit, int device_id);
  void SparseOne(Tensor& flat, Tensor* acc, float spars, bool topK, const char* where);
  void Fused(std::vector<Tensor>& t, bool send, bool half, const char* where);
  Tensor Check(const Tensor& t, const char* where, bool float32_only) const;

  int global_rank_ = 0, world_size_ = 1, device_id_ = 0, limit_ = 0;
  std::unique_ptr<Impl> impl_;
};

}  // namespace singa

#endif  // SINGA_DIST_COMMUNICATOR_H_
