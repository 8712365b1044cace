// SINGA's NcclIdHolder and Communicator (include/singa/dist/communicator.h),
// present when the CUDA build found NCCL (singa_wrap.USE_DIST is 1), as in
// SINGA's dist_communicator.i. opt.DistOpt uses them for GPU parameters.
//
// An NcclIdHolder travels between processes as its 128 bytes:
// holder.to_bytes() and NcclIdHolder(bytes); it also pickles (for
// multiprocessing with the spawn start method).
#ifdef SINGA_SWIG_DIST
%{
#include "singa/dist/communicator.h"
%}

namespace singa {

class NcclIdHolder {
 public:
  NcclIdHolder();
};

%extend NcclIdHolder {
  NcclIdHolder(PyObject* id_bytes) {
    char* data = nullptr;
    Py_ssize_t n = 0;
    if (!PyBytes_Check(id_bytes) || PyBytes_AsStringAndSize(id_bytes, &data, &n) < 0) {
      PyErr_Clear();
      throw singa::DtypeError(std::string("NcclIdHolder: expected the bytes of an NCCL id, "
                                          "got ") + Py_TYPE(id_bytes)->tp_name);
    }
    return new singa::NcclIdHolder(std::string(data, static_cast<size_t>(n)));
  }
  PyObject* to_bytes() const {
    const std::string b = $self->bytes();
    return PyBytes_FromStringAndSize(b.data(), static_cast<Py_ssize_t>(b.size()));
  }
}

class Communicator {
 public:
  Communicator(int limit);
  Communicator(int local_rank, int world_size, const NcclIdHolder& holder, int limit);
  Communicator(int global_rank, int world_size, const NcclIdHolder& holder, int limit,
               int device_id);
  void synch(Tensor& t);
  void fusedSynch(std::vector<Tensor>& t, bool send = true);
  void synchHalf(Tensor& t);
  void fusedSynchHalf(std::vector<Tensor>& t, bool send = true);
  void sparsification(Tensor& t, Tensor& accumulation, float sparsThreshold, bool topK);
  void sparsification(Tensor& t, float sparsThreshold, bool topK);
  void fusedSparsification(std::vector<Tensor>& t, Tensor& accumulation, float sparsThreshold,
                           bool topK);
  void fusedSparsification(std::vector<Tensor>& t, float sparsThreshold, bool topK);
  void wait();
  int global_rank() const;
  int world_size() const;
  int device_id() const;
  int limit() const;
};

}  // namespace singa

%pythoncode %{
import copyreg as _copyreg


def _nccl_id_reduce(holder):
    return NcclIdHolder, (holder.to_bytes(),)


_copyreg.pickle(NcclIdHolder, _nccl_id_reduce)
%}
#endif  // SINGA_SWIG_DIST
