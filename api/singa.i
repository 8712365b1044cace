// The singa_wrap module: the C++ core as seen from Python. One %exception
// block turns every typed C++ error into the matching Python exception.
%module(package="singa") singa_wrap

%{
#include <new>
#include <stdexcept>
#include "singa/core/tensor.h"
#include "singa/core/device.h"
#include "singa/core/graph.h"

// singa_wrap.GraphError, a RuntimeError (made when the module loads).
static PyObject* singa_GraphError = nullptr;
%}

%init %{
  singa_GraphError = PyErr_NewException("singa.singa_wrap.GraphError", PyExc_RuntimeError, NULL);
  Py_XINCREF(singa_GraphError);
  PyModule_AddObject(m, "GraphError", singa_GraphError);
  SwigPyBuiltin_AddPublicSymbol(public_interface, "GraphError");
%}

%include "std_string.i"
%include "std_vector.i"
%include "std_shared_ptr.i"
%include "stdint.i"

%exception {
  try {
    $action
  } catch (const singa::ShapeError& e) {
    PyErr_SetString(PyExc_ValueError, e.what());
    SWIG_fail;
  } catch (const singa::ValueError& e) {
    PyErr_SetString(PyExc_ValueError, e.what());
    SWIG_fail;
  } catch (const singa::DtypeError& e) {
    PyErr_SetString(PyExc_TypeError, e.what());
    SWIG_fail;
  } catch (const singa::IndexError& e) {
    PyErr_SetString(PyExc_IndexError, e.what());
    SWIG_fail;
  } catch (const singa::NotImplementedError& e) {
    PyErr_SetString(PyExc_NotImplementedError, e.what());
    SWIG_fail;
  } catch (const singa::MemoryError& e) {
    PyErr_SetString(PyExc_MemoryError, e.what());
    SWIG_fail;
  } catch (const singa::GraphError& e) {
    PyErr_SetString(singa_GraphError, e.what());
    SWIG_fail;
  } catch (const singa::Error& e) {  // DeviceError, CudaError
    PyErr_SetString(PyExc_RuntimeError, e.what());
    SWIG_fail;
  } catch (const std::bad_alloc&) {
    PyErr_SetString(PyExc_MemoryError, "singa: out of memory");
    SWIG_fail;
  } catch (const std::invalid_argument& e) {
    PyErr_SetString(PyExc_ValueError, e.what());
    SWIG_fail;
  } catch (const std::out_of_range& e) {
    PyErr_SetString(PyExc_IndexError, e.what());
    SWIG_fail;
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
    SWIG_fail;
  }
}

// Arguments are checked on the way in, so that a wrong Python value is a
// Python exception of the documented kinds, never a crash or an
// OverflowError: None for a Tensor pointer, a float beyond float32's range,
// an int outside its C type, an object made by __new__ without __init__.
%typemap(check) singa::Tensor * {
  if (!$1) {
    PyErr_SetString(PyExc_TypeError, "$symname: argument $argnum must be a Tensor, got None");
    SWIG_fail;
  }
}

// X.__new__(X) gives an object whose pointer and SWIG type are both null,
// and SWIG's argument conversion reads the type's name. Objects are
// allocated with this placeholder type instead, which converts to nothing,
// so using one raises TypeError; __init__ replaces it with the real type.
%{
static swig_type_info singa_uninitialised_type = {
    "uninitialised", "object made by __new__ without __init__", 0, 0, 0, 0};

static PyObject* SingaBuiltinAlloc(PyTypeObject* type, Py_ssize_t nitems) {
  PyObject* obj = PyType_GenericAlloc(type, nitems);
  if (obj) reinterpret_cast<SwigPyObject*>(obj)->ty = &singa_uninitialised_type;
  return obj;
}
%}

%{
#include <cfloat>
#include <cmath>
#include <climits>
#include <cstdint>

// A Python number as a float32 argument: ValueError naming the value when
// it is finite but beyond float32's range, TypeError when not a number.
static int SingaArgFloat(PyObject* o, float* out, const char* fn, int argnum) {
  double v = PyFloat_AsDouble(o);
  if (v == -1.0 && PyErr_Occurred()) {
    PyErr_Clear();
    PyErr_Format(PyExc_TypeError, "%s: argument %d must be a number, got %s", fn, argnum,
                 Py_TYPE(o)->tp_name);
    return 0;
  }
  if (std::isfinite(v) && std::fabs(v) > FLT_MAX) {
    PyErr_Format(PyExc_ValueError, "%s: argument %d, %R, is outside the float32 range "
                 "(magnitude at most 3.4028235e+38)", fn, argnum, o);
    return 0;
  }
  *out = static_cast<float>(v);
  return 1;
}

// A Python int as an integer argument in [lo, hi]: ValueError naming the
// value when outside, TypeError when not an int.
static int SingaArgInt(PyObject* o, long long lo, unsigned long long hi,
                       unsigned long long* out_bits, const char* fn, int argnum,
                       const char* ctype) {
  if (!PyIndex_Check(o)) {
    PyErr_Format(PyExc_TypeError, "%s: argument %d must be an int, got %s", fn, argnum,
                 Py_TYPE(o)->tp_name);
    return 0;
  }
  PyObject* i = PyNumber_Index(o);
  if (!i) return 0;
  int overflow = 0;
  long long v = PyLong_AsLongLongAndOverflow(i, &overflow);
  bool ok;
  unsigned long long bits = 0;
  if (overflow > 0) {
    unsigned long long u = PyLong_AsUnsignedLongLong(i);
    ok = !PyErr_Occurred() && u <= hi;
    PyErr_Clear();
    bits = u;
  } else if (overflow < 0 || (v == -1 && PyErr_Occurred())) {
    PyErr_Clear();
    ok = false;
  } else {
    ok = v >= lo && (v < 0 || static_cast<unsigned long long>(v) <= hi);
    bits = static_cast<unsigned long long>(v);
  }
  if (!ok) {
    PyErr_Format(PyExc_ValueError, "%s: argument %d, %R, is outside the range of %s "
                 "(%lld to %llu)", fn, argnum, i, ctype, lo, hi);
    Py_DECREF(i);
    return 0;
  }
  Py_DECREF(i);
  *out_bits = bits;
  return 1;
}
%}

%typemap(in) float {
  if (!SingaArgFloat($input, &$1, "$symname", $argnum)) SWIG_fail;
}
%typemap(typecheck, precedence=SWIG_TYPECHECK_FLOAT) float {
  PyNumberMethods* nm = Py_TYPE($input)->tp_as_number;
  $1 = PyFloat_Check($input) || PyIndex_Check($input) || (nm && nm->nb_float) ? 1 : 0;
}
%define SINGA_INT_ARG(CTYPE, LO, HI)
%typemap(in) CTYPE (unsigned long long bits) {
  if (!SingaArgInt($input, LO, HI, &bits, "$symname", $argnum, #CTYPE)) SWIG_fail;
  $1 = static_cast<CTYPE>(bits);
}
%typemap(typecheck, precedence=SWIG_TYPECHECK_INTEGER) CTYPE {
  $1 = PyIndex_Check($input) ? 1 : 0;
}
%enddef
SINGA_INT_ARG(int, INT_MIN, INT_MAX)
SINGA_INT_ARG(unsigned, 0, UINT_MAX)
SINGA_INT_ARG(size_t, 0, SIZE_MAX)
SINGA_INT_ARG(int64_t, INT64_MIN, INT64_MAX)
// A dtype code outside the enum would be undefined once cast to it.
%typemap(in) singa::DataType (unsigned long long bits) {
  if (!SingaArgInt($input, INT_MIN, INT_MAX, &bits, "$symname", $argnum, "int")) SWIG_fail;
  if (static_cast<long long>(bits) < 0 || bits >= singa::kNumDataType) {
    PyErr_Format(PyExc_TypeError, "$symname: unknown dtype code %R; use kFloat32, kFloat16 "
                 "or kInt", $input);
    SWIG_fail;
  }
  $1 = static_cast<singa::DataType>(bits);
}
%typemap(typecheck, precedence=SWIG_TYPECHECK_INTEGER) singa::DataType {
  $1 = PyIndex_Check($input) ? 1 : 0;
}

%template(Shape) std::vector<size_t>;
%template(VecInt) std::vector<int>;
%template(VecInt64) std::vector<int64_t>;
%include "config.i"

%include "core_device.i"
%include "core_tensor.i"
// SINGA's C++ API names over the functions above.
%include "compat_device.i"
%include "compat_tensor.i"
%include "core_nn.i"
%include "model_operation.i"
%include "host_buffer.i"
%include "core_cpu.i"
%include "dist_communicator.i"

// After every class above: their Python types exist by now (see
// SingaBuiltinAlloc).
%init %{
  for (size_t i = 0; i < swig_module.size; ++i) {
    SwigPyClientData* cd = static_cast<SwigPyClientData*>(swig_module.types[i]->clientdata);
    if (cd && cd->pytype && cd->pytype->tp_alloc == PyType_GenericAlloc)
      cd->pytype->tp_alloc = SingaBuiltinAlloc;
  }
%}
