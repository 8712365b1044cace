# The CUDA backend. Included by CMakeLists.txt after Python is found.
#
# USE_CUDA=AUTO builds it when nvcc and cuBLAS/cuRAND are found, ON insists
# (and fails saying what is missing), OFF skips it. cuBLAS, cuRAND and the
# CUDA runtime come from the nvidia-* wheels of the building Python
# (site-packages/nvidia/cu13) or, failing that, from the CUDA toolkit. The
# module finds the wheels' libraries through its rpath, so nothing has to be
# set in the environment at run time.
#
# Defines: USE_CUDA (ON/OFF), the object library singa_cuda (src/core/**/*.cu;
# singa_core links it, which adds its objects, libraries and USE_CUDA define),
# SINGA_CUDA_INSTALL_RPATH and SINGA_CUDA_BUILD_RPATH for the module.

set(USE_CUDA AUTO CACHE STRING "Build the CUDA backend: ON, OFF or AUTO")
set(SINGA_CUDA_ARCHITECTURES "90" CACHE STRING
    "CUDA architectures (CMake syntax; \"90\" is sm_90 code plus compute_90 PTX)")
string(TOUPPER "${USE_CUDA}" _singa_cuda_want)
if(NOT _singa_cuda_want MATCHES "^(ON|OFF|AUTO|TRUE|FALSE|1|0|YES|NO)$")
  message(FATAL_ERROR "USE_CUDA must be ON, OFF or AUTO, not '${USE_CUDA}'")
endif()
if(_singa_cuda_want MATCHES "^(TRUE|1|YES)$")
  set(_singa_cuda_want ON)
elseif(_singa_cuda_want MATCHES "^(FALSE|0|NO)$")
  set(_singa_cuda_want OFF)
endif()

set(SINGA_CUDA_INSTALL_RPATH "")
set(SINGA_CUDA_BUILD_RPATH "")

# Reports why CUDA cannot be built: fatal under ON, a note under AUTO.
macro(_singa_cuda_missing why)
  if(_singa_cuda_want STREQUAL "ON")
    message(FATAL_ERROR "USE_CUDA=ON: ${why}")
  endif()
  message(STATUS "singa: CUDA backend off (${why})")
  set(_singa_cuda_want OFF)
endmacro()

if(NOT _singa_cuda_want STREQUAL "OFF")
  include(CheckLanguage)
  check_language(CUDA)
  if(NOT CMAKE_CUDA_COMPILER)
    _singa_cuda_missing("no CUDA compiler (nvcc) found; put it on the PATH or set CMAKE_CUDA_COMPILER")
  endif()
endif()

if(NOT _singa_cuda_want STREQUAL "OFF")
  # Library folders of the nvidia-* wheels: nvidia/cu13 holds cuBLAS, cuRAND
  # and the runtime together (CUDA 13); CUDA 12 wheels use one folder each.
  execute_process(
    COMMAND "${Python_EXECUTABLE}" -c
      "import nvidia, os\nfor p in nvidia.__path__:\n    print(os.path.realpath(p))"
    OUTPUT_VARIABLE _nv_roots OUTPUT_STRIP_TRAILING_WHITESPACE
    RESULT_VARIABLE _nv_rc ERROR_QUIET)
  set(_nv_dirs "")
  if(_nv_rc EQUAL 0 AND _nv_roots)
    string(REPLACE "\n" ";" _nv_roots "${_nv_roots}")
    foreach(_r IN LISTS _nv_roots)
      foreach(_sub cu13 cublas curand cuda_runtime)
        if(EXISTS "${_r}/${_sub}/include")
          list(APPEND _nv_dirs "${_r}/${_sub}")
        endif()
      endforeach()
    endforeach()
  endif()
  set(_nv_inc "")
  set(_nv_lib "")
  foreach(_d IN LISTS _nv_dirs)
    list(APPEND _nv_inc "${_d}/include")
    list(APPEND _nv_lib "${_d}/lib")
  endforeach()

  find_path(SINGA_CUBLAS_INCLUDE_DIR cublas_v2.h PATHS ${_nv_inc} NO_DEFAULT_PATH)
  find_path(SINGA_CURAND_INCLUDE_DIR curand.h PATHS ${_nv_inc} NO_DEFAULT_PATH)
  find_library(SINGA_CUBLAS_LIB NAMES libcublas.so.13 libcublas.so.12 cublas
               PATHS ${_nv_lib} NO_DEFAULT_PATH)
  find_library(SINGA_CUBLASLT_LIB NAMES libcublasLt.so.13 libcublasLt.so.12 cublasLt
               PATHS ${_nv_lib} NO_DEFAULT_PATH)
  find_library(SINGA_CURAND_LIB NAMES libcurand.so.10 curand PATHS ${_nv_lib} NO_DEFAULT_PATH)
  find_library(SINGA_CUDART_LIB NAMES libcudart.so.13 libcudart.so.12 cudart
               PATHS ${_nv_lib} NO_DEFAULT_PATH)

  set(SINGA_CUDA_LIBS_FROM "")
  if(SINGA_CUBLAS_INCLUDE_DIR AND SINGA_CURAND_INCLUDE_DIR AND SINGA_CUBLAS_LIB
     AND SINGA_CUBLASLT_LIB AND SINGA_CURAND_LIB AND SINGA_CUDART_LIB)
    set(SINGA_CUDA_LIBS_FROM "wheels")
  else()
    # A CUDA toolkit that has the libraries itself (the nvcc-only toolkits of
    # the PyPI compiler packages do not).
    find_package(CUDAToolkit QUIET)
    if(TARGET CUDA::cublas AND TARGET CUDA::curand AND TARGET CUDA::cudart)
      set(SINGA_CUDA_LIBS_FROM "toolkit")
    endif()
  endif()
  if(NOT SINGA_CUDA_LIBS_FROM)
    _singa_cuda_missing("cuBLAS/cuRAND not found: pip install nvidia-cublas nvidia-curand nvidia-cuda-runtime (into ${Python_EXECUTABLE}'s environment), or install a CUDA toolkit with them")
  endif()
endif()

if(_singa_cuda_want STREQUAL "OFF")
  set(USE_CUDA OFF)
  return()
endif()
set(USE_CUDA ON)

if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
  set(CMAKE_CUDA_ARCHITECTURES "${SINGA_CUDA_ARCHITECTURES}")
endif()
# The runtime is linked as a shared library so that cuRAND (which needs
# libcudart.so) and singa load the same one.
set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)
enable_language(CUDA)
set(CMAKE_CUDA_STANDARD 17)
set(CMAKE_CUDA_STANDARD_REQUIRED ON)

file(GLOB SINGA_CUDA_SOURCES CONFIGURE_DEPENDS
  "${CMAKE_SOURCE_DIR}/src/core/device/*.cu"
  "${CMAKE_SOURCE_DIR}/src/core/tensor/*.cu"
  "${CMAKE_SOURCE_DIR}/src/core/nn/*.cu")
add_library(singa_cuda OBJECT ${SINGA_CUDA_SOURCES})
target_include_directories(singa_cuda PRIVATE "${CMAKE_SOURCE_DIR}/include"
                           "${CMAKE_SOURCE_DIR}/src/core" "${CMAKE_SOURCE_DIR}/src/core/tensor")
target_compile_definitions(singa_cuda PUBLIC USE_CUDA)
# No fast math: results should match the CPU backend to a few ulps.
target_compile_options(singa_cuda PRIVATE
  $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr -lineinfo>)
set_target_properties(singa_cuda PROPERTIES POSITION_INDEPENDENT_CODE ON
                      CUDA_RUNTIME_LIBRARY Shared)

if(SINGA_CUDA_LIBS_FROM STREQUAL "wheels")
  # The wheels' runtime headers may be newer than nvcc's: they go after its own.
  target_compile_options(singa_cuda PRIVATE
    "$<$<COMPILE_LANGUAGE:CUDA>:SHELL:-Xcompiler -idirafter${SINGA_CUBLAS_INCLUDE_DIR}>"
    "$<$<COMPILE_LANGUAGE:CUDA>:SHELL:-Xcompiler -idirafter${SINGA_CURAND_INCLUDE_DIR}>")
  target_link_libraries(singa_cuda PUBLIC "${SINGA_CUBLAS_LIB}" "${SINGA_CUBLASLT_LIB}"
                        "${SINGA_CURAND_LIB}" "${SINGA_CUDART_LIB}")
  get_filename_component(_cublas_dir "${SINGA_CUBLAS_LIB}" DIRECTORY)
  get_filename_component(_curand_dir "${SINGA_CURAND_LIB}" DIRECTORY)
  get_filename_component(_cudart_dir "${SINGA_CUDART_LIB}" DIRECTORY)
  set(SINGA_CUDA_BUILD_RPATH ${_cublas_dir} ${_curand_dir} ${_cudart_dir})
  list(REMOVE_DUPLICATES SINGA_CUDA_BUILD_RPATH)
  # Installed, the module sits in site-packages/singa and the wheels in
  # site-packages/nvidia/<folder>/lib.
  foreach(_d IN LISTS SINGA_CUDA_BUILD_RPATH)
    get_filename_component(_pkg "${_d}" DIRECTORY)
    get_filename_component(_pkg "${_pkg}" NAME)
    list(APPEND SINGA_CUDA_INSTALL_RPATH "$ORIGIN/../nvidia/${_pkg}/lib")
  endforeach()
else()
  target_link_libraries(singa_cuda PUBLIC CUDA::cublas CUDA::curand CUDA::cudart)
  set(SINGA_CUDA_BUILD_RPATH "${CUDAToolkit_LIBRARY_DIR}")
  set(SINGA_CUDA_INSTALL_RPATH "${CUDAToolkit_LIBRARY_DIR}")
endif()
message(STATUS "singa: CUDA ${CMAKE_CUDA_COMPILER_VERSION}, architectures "
               "${CMAKE_CUDA_ARCHITECTURES}, cuBLAS/cuRAND from the ${SINGA_CUDA_LIBS_FROM}")
