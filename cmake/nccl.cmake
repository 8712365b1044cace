# The NCCL communicator (src/dist, singa_wrap.Communicator and NcclIdHolder)
# of a CUDA build. Included by CMakeLists.txt after cmake/cuda.cmake.
#
# USE_DIST=AUTO builds it when the CUDA backend is built and NCCL is found,
# ON insists (and fails saying what is missing), OFF skips it. NCCL comes
# from the nvidia-nccl-cu13 wheel of the building Python
# (site-packages/nvidia/nccl, the "cuda" extra installs it) or, failing
# that, from the system (nccl.h and libnccl.so on the default paths); the
# wheel comes first, so that header and library match.
#
# Defines: USE_DIST (ON/OFF), the object library singa_dist (singa_core
# links it, which adds the USE_DIST define), and appends to
# SINGA_CUDA_INSTALL_RPATH / SINGA_CUDA_BUILD_RPATH.

set(USE_DIST AUTO CACHE STRING "Build the NCCL communicator: ON, OFF or AUTO")
string(TOUPPER "${USE_DIST}" _singa_dist_want)
if(_singa_dist_want MATCHES "^(TRUE|1|YES)$")
  set(_singa_dist_want ON)
elseif(_singa_dist_want MATCHES "^(FALSE|0|NO)$")
  set(_singa_dist_want OFF)
endif()
if(NOT _singa_dist_want MATCHES "^(ON|OFF|AUTO)$")
  message(FATAL_ERROR "USE_DIST must be ON, OFF or AUTO, not '${USE_DIST}'")
endif()

macro(_singa_dist_missing why)
  if(_singa_dist_want STREQUAL "ON")
    message(FATAL_ERROR "USE_DIST=ON: ${why}")
  endif()
  message(STATUS "singa: NCCL communicator off (${why})")
  set(_singa_dist_want OFF)
endmacro()

if(NOT _singa_dist_want STREQUAL "OFF" AND NOT USE_CUDA)
  _singa_dist_missing("it needs the CUDA backend (USE_CUDA=ON)")
endif()

if(NOT _singa_dist_want STREQUAL "OFF")
  execute_process(
    COMMAND "${Python_EXECUTABLE}" -c
      "import nvidia, os\nfor p in nvidia.__path__:\n    print(os.path.realpath(os.path.join(p, 'nccl')))"
    OUTPUT_VARIABLE _nccl_roots OUTPUT_STRIP_TRAILING_WHITESPACE
    RESULT_VARIABLE _nccl_rc ERROR_QUIET)
  set(_nccl_inc "")
  set(_nccl_lib "")
  if(_nccl_rc EQUAL 0 AND _nccl_roots)
    string(REPLACE "\n" ";" _nccl_roots "${_nccl_roots}")
    foreach(_r IN LISTS _nccl_roots)
      list(APPEND _nccl_inc "${_r}/include")
      list(APPEND _nccl_lib "${_r}/lib")
    endforeach()
  endif()
  find_path(SINGA_NCCL_INCLUDE_DIR nccl.h HINTS ${_nccl_inc})
  find_library(SINGA_NCCL_LIB NAMES libnccl.so.2 nccl HINTS ${_nccl_lib})
  if(NOT SINGA_NCCL_INCLUDE_DIR OR NOT SINGA_NCCL_LIB)
    _singa_dist_missing("NCCL not found: pip install nvidia-nccl-cu13 (the \"cuda\" extra) into ${Python_EXECUTABLE}'s environment")
  endif()
endif()

if(_singa_dist_want STREQUAL "OFF")
  set(USE_DIST OFF)
  return()
endif()
set(USE_DIST ON)

file(GLOB SINGA_DIST_SOURCES CONFIGURE_DEPENDS "${CMAKE_SOURCE_DIR}/src/dist/*.cu")
add_library(singa_dist OBJECT ${SINGA_DIST_SOURCES})
target_include_directories(singa_dist PRIVATE "${CMAKE_SOURCE_DIR}/include"
                           "${CMAKE_SOURCE_DIR}/src/core")
target_compile_options(singa_dist PRIVATE
  "$<$<COMPILE_LANGUAGE:CUDA>:SHELL:-Xcompiler -idirafter${SINGA_NCCL_INCLUDE_DIR}>")
if(SINGA_CUBLAS_INCLUDE_DIR)
  target_compile_options(singa_dist PRIVATE
    "$<$<COMPILE_LANGUAGE:CUDA>:SHELL:-Xcompiler -idirafter${SINGA_CUBLAS_INCLUDE_DIR}>")
endif()
target_compile_definitions(singa_dist PUBLIC USE_DIST USE_CUDA)
set_target_properties(singa_dist PROPERTIES POSITION_INDEPENDENT_CODE ON
                      CUDA_RUNTIME_LIBRARY Shared)
target_link_libraries(singa_dist PUBLIC "${SINGA_NCCL_LIB}")
get_filename_component(_nccl_dir "${SINGA_NCCL_LIB}" DIRECTORY)
list(APPEND SINGA_CUDA_BUILD_RPATH "${_nccl_dir}")
get_filename_component(_nccl_pkg "${_nccl_dir}" DIRECTORY)
get_filename_component(_nccl_pkg "${_nccl_pkg}" NAME)
if(_nccl_dir MATCHES "/nvidia/${_nccl_pkg}/lib$")
  # Installed, the module sits in site-packages/singa and the wheel in
  # site-packages/nvidia/nccl/lib.
  list(APPEND SINGA_CUDA_INSTALL_RPATH "$ORIGIN/../nvidia/${_nccl_pkg}/lib")
else()
  list(APPEND SINGA_CUDA_INSTALL_RPATH "${_nccl_dir}")
endif()
message(STATUS "singa: NCCL communicator from ${SINGA_NCCL_LIB}")
