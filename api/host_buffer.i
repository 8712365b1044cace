// Zero-copy access to a host tensor's memory for communication libraries
// (mpi4py sends and receives straight from it). HostBuffer(t) holds a copy
// of the Tensor, so its Block stays alive for as long as the HostBuffer or
// any memoryview of it exists, and exports the elements through Python's
// buffer protocol as one flat, writable array:
//
//     view = memoryview(singa_wrap.HostBuffer(t))   # format 'f', 'e' or 'i'
//
// Only contiguous tensors on a host device qualify; anything else raises
// before a pointer is taken.
%{
namespace singa {

class HostBuffer {
 public:
  explicit HostBuffer(const Tensor& t) : tensor_(t) {
    SINGA_CHECK(!t.empty(), ValueError, "HostBuffer: the tensor has no storage");
    // Its values exist only once recorded work has run.
    t.device()->CheckHostRead("HostBuffer");
    SINGA_CHECK(t.device()->is_host(), DeviceError, "HostBuffer: the tensor is on ",
                t.device()->name(), "; only host tensors can be exported");
    SINGA_CHECK(t.IsContiguous(), ValueError, "HostBuffer: the tensor of shape ", t.shape(),
                " with strides ", t.stride(), " is not contiguous; export a contiguous copy");
    SINGA_CHECK((t.offset() + t.Size()) * SizeOf(t.data_type()) <= t.block()->size(),
                ValueError, "HostBuffer: elements [", t.offset(), ", ", t.offset() + t.Size(),
                ") lie outside the tensor's storage of ", t.block()->size(), " bytes");
  }
  size_t nbytes() const { return tensor_.MemSize(); }
  // The one-dimensional shape handed to buffer consumers; it must outlive
  // every exported view, as this object does.
  Py_ssize_t* shape() {
    shape_ = static_cast<Py_ssize_t>(tensor_.Size());
    return &shape_;
  }
  size_t size() const { return tensor_.Size(); }
  DataType data_type() const { return tensor_.data_type(); }
  // Whatever is written through the view bypasses mutable_data(), so the
  // block is marked as untracked (no cache may trust its stamp).
  void* address() {
    void* a = tensor_.mutable_raw_data();
    tensor_.block()->ExportWritable();
    return a;
  }
  // The struct-module format of one element.
  const char* format() const {
    switch (tensor_.data_type()) {
      case kFloat16:
        return "e";
      case kInt:
        return "i";
      default:
        return "f";
    }
  }

 private:
  Tensor tensor_;
  Py_ssize_t shape_ = 0;
};

}  // namespace singa

static int singa_HostBuffer_getbuffer(PyObject* exporter, Py_buffer* view, int flags) {
  void* argp = nullptr;
  if (!SWIG_IsOK(SWIG_ConvertPtr(exporter, &argp, SWIGTYPE_p_singa__HostBuffer, 0)) || !argp) {
    PyErr_SetString(PyExc_TypeError, "HostBuffer: not a HostBuffer");
    view->obj = nullptr;
    return -1;
  }
  auto* buf = static_cast<singa::HostBuffer*>(argp);
  void* address;
  try {
    address = buf->address();
  } catch (const singa::MemoryError& e) {
    PyErr_SetString(PyExc_MemoryError, e.what());
    view->obj = nullptr;
    return -1;
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
    view->obj = nullptr;
    return -1;
  }
  if (PyBuffer_FillInfo(view, exporter, address, static_cast<Py_ssize_t>(buf->nbytes()), 0,
                        flags) != 0)
    return -1;
  // Typed, one-dimensional: consumers see elements, not bytes, when they
  // ask for the format (NumPy, mpi4py).
  if (flags & PyBUF_FORMAT) view->format = const_cast<char*>(buf->format());
  view->itemsize = static_cast<Py_ssize_t>(singa::SizeOf(buf->data_type()));
  if (flags & PyBUF_ND) view->shape = buf->shape();
  // PyBuffer_FillInfo points strides (when asked for) at itemsize: right
  // for a contiguous one-dimensional array.
  return 0;
}
%}

%feature("python:bf_getbuffer", functype="getbufferproc") singa::HostBuffer
    "singa_HostBuffer_getbuffer";

namespace singa {

class HostBuffer {
 public:
  explicit HostBuffer(const Tensor& t);
  size_t nbytes() const;
  size_t size() const;
};

}  // namespace singa
