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

%template(Shape) std::vector<size_t>;
%template(VecInt) std::vector<int>;
%template(VecInt64) std::vector<int64_t>;

%include "core_device.i"
%include "core_tensor.i"
%include "core_nn.i"
%include "host_buffer.i"
