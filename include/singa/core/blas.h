// The bundled OpenBLAS (scipy-openblas32 wheel) exports every symbol with a
// "scipy_" prefix so it cannot clash with another BLAS loaded in the same
// process. Code calls SINGA_BLAS(cblas_sgemm)(...) so that a plain system
// CBLAS can be swapped in by defining SINGA_BLAS_NO_PREFIX.
#ifndef SINGA_CORE_BLAS_H_
#define SINGA_CORE_BLAS_H_

#include <cblas.h>

#ifdef SINGA_BLAS_NO_PREFIX
#define SINGA_BLAS(name) name
#else
#define SINGA_BLAS(name) scipy_##name
#endif

#if defined(_OPENMP) && !defined(SINGA_BLAS_NO_PREFIX)
#include <omp.h>

#include <cstddef>
#include <thread>
#include <vector>
#endif

namespace singa {

#if defined(_OPENMP) && !defined(SINGA_BLAS_NO_PREFIX)
// OpenBLAS runs its parallel jobs through this instead of its own pthreads.
// Two thread pools on the same cores fight: OpenMP workers keep spinning
// after a region while OpenBLAS workers want the cores, which made conv 3-4x
// slower. OpenBLAS jobs wait on each other, so all of them must run at the
// same time; any job the OpenMP team cannot host gets its own std::thread.
// All jobs have finished when this returns, which is what OpenBLAS's
// synchronous exec_blas (sync = 1) expects.
inline void OpenMPBlasJobs(int /*sync*/, openblas_dojob_callback dojob,
                           int numjobs, size_t elsize, void* jobdata,
                           int dojob_data) {
  char* jobs = static_cast<char*>(jobdata);
  auto run = [&](int j) { dojob(j, jobs + size_t(j) * elsize, dojob_data); };
  const bool team = numjobs > 1 && !omp_in_parallel();
#pragma omp parallel num_threads(numjobs) if (team)
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    std::vector<std::thread> extra;
    if (t == 0)
      for (int j = nt; j < numjobs; ++j) extra.emplace_back(run, j);
    run(t);
    for (auto& th : extra) th.join();
  }
}

// Routes OpenBLAS threading through OpenMP for the whole process. Idempotent.
inline void UseOpenMPForBlas() {
  static const bool done = [] {
    SINGA_BLAS(openblas_set_threads_callback_function)(OpenMPBlasJobs);
    return true;
  }();
  (void)done;
}
#else
inline void UseOpenMPForBlas() {}
#endif

}  // namespace singa

#endif  // SINGA_CORE_BLAS_H_
