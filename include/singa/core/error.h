// Typed errors raised by the core. api/singa.i maps each class to one Python
// exception type, so a bad shape or dtype never aborts the interpreter.
#ifndef SINGA_CORE_ERROR_H_
#define SINGA_CORE_ERROR_H_

#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace singa {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
// Python ValueError: shapes that do not broadcast, multiply or reshape.
class ShapeError : public Error {
 public:
  using Error::Error;
};
// Python ValueError: a bad argument value that is not about shapes.
class ValueError : public Error {
 public:
  using Error::Error;
};
// Python TypeError: an unsupported or mismatched dtype.
class DtypeError : public Error {
 public:
  using Error::Error;
};
// Python IndexError: axis or index out of range.
class IndexError : public Error {
 public:
  using Error::Error;
};
// Python RuntimeError: tensors on different devices, device failures.
class DeviceError : public Error {
 public:
  using Error::Error;
};
// Python NotImplementedError.
class NotImplementedError : public Error {
 public:
  using Error::Error;
};
// Python MemoryError: an allocation that failed or cannot be represented.
class MemoryError : public Error {
 public:
  using Error::Error;
};
// Python singa_wrap.GraphError, a RuntimeError: work that cannot be recorded
// into a graph, such as a read of device values while a step is recorded.
class GraphError : public Error {
 public:
  using Error::Error;
};
// Python RuntimeError: a CUDA runtime or library call that failed.
class CudaError : public Error {
 public:
  using Error::Error;
};

namespace detail {
template <typename T>
void StreamOne(std::ostringstream& os, const T& v) {
  os << v;
}
template <typename T>
void StreamOne(std::ostringstream& os, const std::vector<T>& v) {
  os << '(';
  for (size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
  os << (v.size() == 1 ? ",)" : ")");
}
template <typename... Args>
std::string Concat(const Args&... args) {
  std::ostringstream os;
  (StreamOne(os, args), ...);
  return os.str();
}
}  // namespace detail

}  // namespace singa

// SINGA_CHECK(cond, ShapeError, "Add: shapes ", a, " and ", b, " ...") throws
// singa::ShapeError with the pieces concatenated; vectors print as tuples.
#define SINGA_CHECK(cond, ErrType, ...)                             \
  do {                                                              \
    if (!(cond))                                                    \
      throw ::singa::ErrType(::singa::detail::Concat(__VA_ARGS__)); \
  } while (0)

#define SINGA_THROW(ErrType, ...) \
  throw ::singa::ErrType(::singa::detail::Concat(__VA_ARGS__))

#endif  // SINGA_CORE_ERROR_H_
