// What this build contains, under the names of SINGA's config.i: scripts
// branch on them (`if singa_wrap.USE_CUDA: dev = device.create_cuda_gpu()`).
// Flags are the ints 0 and 1, as SINGA's #cmakedefine01 gives them. The
// values come from what was compiled: USE_CUDA from the core's kUseCuda
// (the USE_CUDA macro of a CUDA build); singa has no cuDNN, OpenCL, DNNL or
// C++ (NCCL) communicator, so those are 0 (CUDNN_VERSION 0). The version
// is CMake's project version.
%{
#ifdef USE_DIST
#define SINGA_CFG_USE_DIST 1
#else
#define SINGA_CFG_USE_DIST 0
#endif
#if !defined(SINGA_MAJOR_VERSION) || !defined(SINGA_MINOR_VERSION) || !defined(SINGA_PATCH_VERSION)
#error "CMake passes SINGA_MAJOR_VERSION, SINGA_MINOR_VERSION and SINGA_PATCH_VERSION"
#endif
%}

%constant int USE_CUDA = singa::kUseCuda ? 1 : 0;
%constant int USE_CUDNN = 0;
%constant int USE_OPENCL = 0;
%constant int USE_DNNL = 0;
%constant int USE_DIST = SINGA_CFG_USE_DIST;
%constant int USE_PYTHON = 1;
%constant int USE_JAVA = 0;
%constant int CUDNN_VERSION = 0;
%constant int SINGA_MAJOR_VERSION = SINGA_MAJOR_VERSION;
%constant int SINGA_MINOR_VERSION = SINGA_MINOR_VERSION;
%constant int SINGA_PATCH_VERSION = SINGA_PATCH_VERSION;
// SINGA's encoding: major * 1000 + minor * 100 + patch.
%constant int SINGA_VERSION = SINGA_MAJOR_VERSION * 1000 + SINGA_MINOR_VERSION * 100 +
                              SINGA_PATCH_VERSION;
