// OpenBLAS jobs run on the OpenMP team instead of OpenBLAS's own pthreads.
// Two thread pools on the same cores fight: OpenMP workers keep spinning
// after a region while OpenBLAS workers want the cores, which made conv 3-4x
// slower. OpenBLAS jobs wait on each other, so all of them must run at the
// same time, and all have finished when the callback returns (OpenBLAS's
// synchronous exec_blas).
//
// Nothing here may throw: the callback is entered from OpenBLAS's C code
// and runs jobs inside an OpenMP region, and an exception escaping either
// ends the process. Jobs the team cannot host (a BLAS call made inside a
// parallel region, or a team cut short by OMP_DYNAMIC or OMP_THREAD_LIMIT)
// go to reserve threads started before the region, where a failure to start
// one is caught rather than thrown.
#include "singa/core/blas.h"

#include <string>

#if defined(_OPENMP) && !defined(SINGA_BLAS_NO_PREFIX)

#include <omp.h>
#include <pthread.h>

#include <condition_variable>
#include <mutex>
#include <new>
#include <thread>

namespace singa {
namespace {

struct JobBatch {
  openblas_dojob_callback dojob = nullptr;
  char* jobs = nullptr;
  size_t elsize = 0;
  int dojob_data = 0;
  void Run(int j) const { dojob(j, jobs + size_t(j) * elsize, dojob_data); }
};

// Detached threads that sleep on a condition variable until jobs are
// posted, so they never compete with the OpenMP team for cores.
class Reserve {
 public:
  // Starts workers until there are n; false when the system refuses one.
  bool Grow(int n) noexcept {
    std::lock_guard<std::mutex> lock(mu_);
    try {
      while (workers_ < n) {
        std::thread(&Reserve::Work, this).detach();
        ++workers_;
      }
    } catch (...) {
      return false;
    }
    return true;
  }

  // Hands jobs [first, last) to the workers, one each, and returns at once;
  // Wait() returns when they have finished. False (and nothing posted) when
  // there are too few workers to run them all at the same time.
  bool Post(const JobBatch& batch, int first, int last) noexcept {
    std::unique_lock<std::mutex> lock(mu_);
    // One batch at a time: a second caller waits for the first to finish.
    idle_.wait(lock, [&] { return !busy_; });
    if (workers_ < last - first) return false;
    busy_ = true;
    batch_ = batch;
    next_ = first;
    end_ = last;
    pending_ = last - first;
    work_.notify_all();
    return true;
  }

  void Wait() noexcept {
    std::unique_lock<std::mutex> lock(mu_);
    finished_.wait(lock, [&] { return pending_ == 0; });
    busy_ = false;
    idle_.notify_all();
  }

 private:
  void Work() noexcept {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      work_.wait(lock, [&] { return next_ < end_; });
      const int j = next_++;
      const JobBatch b = batch_;
      lock.unlock();
      b.Run(j);
      lock.lock();
      if (--pending_ == 0) finished_.notify_all();
    }
  }

  std::mutex mu_;
  std::condition_variable work_, finished_, idle_;
  JobBatch batch_;
  int workers_ = 0, next_ = 0, end_ = 0, pending_ = 0;
  bool busy_ = false;
};

// Never destroyed: detached workers wait on it until the process exits.
Reserve* reserve = new Reserve;

void ResetAfterFork() {
  // The child has none of the parent's threads, and one of them may have
  // held the reserve's mutex at the fork: start from a fresh reserve.
  reserve = new (std::nothrow) Reserve;
}

bool TeamMayFallShort(int numjobs) {
  return omp_in_parallel() || omp_get_dynamic() || omp_get_thread_limit() < numjobs;
}

void OpenMPBlasJobs(int /*sync*/, openblas_dojob_callback dojob, int numjobs,
                    size_t elsize, void* jobdata, int dojob_data) {
  const JobBatch batch{dojob, static_cast<char*>(jobdata), elsize, dojob_data};
  Reserve* spare = reserve;
  if (spare && numjobs > 1 && TeamMayFallShort(numjobs)) spare->Grow(numjobs - 1);
  const bool team = numjobs > 1 && !omp_in_parallel();
#pragma omp parallel num_threads(numjobs) if (team)
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();
    const bool extra = t == 0 && nt < numjobs;
    const bool posted = extra && spare && spare->Post(batch, nt, numjobs);
    batch.Run(t);
    if (posted) {
      spare->Wait();
    } else if (extra) {
      // Last resort, reached only when the system refused the reserve its
      // threads: one after another, which completes for jobs that do not
      // wait on each other.
      for (int j = nt; j < numjobs; ++j) batch.Run(j);
    }
  }
}

}  // namespace

void UseOpenMPForBlas() {
  static const bool done = [] {
    pthread_atfork(nullptr, nullptr, ResetAfterFork);
    SINGA_BLAS(openblas_set_threads_callback_function)(OpenMPBlasJobs);
    return true;
  }();
  (void)done;
}

}  // namespace singa

#else  // a system CBLAS or no OpenMP: the BLAS keeps its own threads

namespace singa {
void UseOpenMPForBlas() {}
}  // namespace singa

#endif

namespace singa {
#ifdef SINGA_BLAS_NO_PREFIX
void SetBlasThreads(int) {}
bool BlasKernelsAvx512() { return true; }
#else
void SetBlasThreads(int n) { SINGA_BLAS(openblas_set_num_threads)(n); }
bool BlasKernelsAvx512() {
  static const bool wide = [] {
    const char* name = SINGA_BLAS(openblas_get_corename)();
    const std::string core = name ? name : "";
    for (const char* w : {"SkylakeX", "Cooperlake", "SapphireRapids"})
      if (core == w) return true;
    return false;
  }();
  return wide;
}
#endif
}  // namespace singa
