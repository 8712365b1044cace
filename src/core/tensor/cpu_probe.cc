// CpuCoreToCoreNs (singa/core/cpu_isa.h): how long a cache line takes to
// travel between two CPUs, for benchmarks that run on shared hosts. Two
// threads, pinned to the two CPUs, take turns incrementing one counter;
// each increment waits for the other CPU's, so a round trip is two
// transfers of the line. On a virtual machine the figure tells whether the
// hypervisor has placed two vCPUs close (one die, a shared L3) or far
// apart, which changes how fast data written by one thread reaches the
// other (doc/performance.md).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "singa/core/cpu_isa.h"
#include "singa/core/error.h"

#if defined(__linux__)
#include <pthread.h>
#include <sched.h>
#endif

namespace singa {

#if defined(__linux__)
namespace {

using Clock = std::chrono::steady_clock;

// The counter, alone on its cache line.
struct alignas(64) Line {
  std::atomic<int64_t> value{0};
  char pad[64 - sizeof(std::atomic<int64_t>)];
};

bool PinTo(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof(set), &set) == 0;
}

// Restores the calling thread's CPU set when the probe ends, however it ends.
class AffinityGuard {
 public:
  AffinityGuard() { ok_ = pthread_getaffinity_np(pthread_self(), sizeof(set_), &set_) == 0; }
  ~AffinityGuard() {
    if (ok_) pthread_setaffinity_np(pthread_self(), sizeof(set_), &set_);
  }
  bool Has(int cpu) const { return ok_ && cpu >= 0 && cpu < CPU_SETSIZE && CPU_ISSET(cpu, &set_); }
  std::string Describe() const {
    std::string s;
    for (int c = 0; ok_ && c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set_)) s += (s.empty() ? "" : ", ") + std::to_string(c);
    return s.empty() ? "none known" : s;
  }

 private:
  cpu_set_t set_;
  bool ok_ = false;
};

// Spins until `line` holds `want` or `deadline` passes; false on time out.
bool WaitFor(const Line& line, int64_t want, Clock::time_point deadline) {
  for (int spins = 0;; ++spins) {
    if (line.value.load(std::memory_order_acquire) == want) return true;
    if ((spins & 4095) == 4095 && Clock::now() > deadline) return false;
  }
}

}  // namespace

double CpuCoreToCoreNs(int cpu_a, int cpu_b, double seconds) {
  SINGA_CHECK(seconds > 0 && seconds <= 60, ValueError,
              "CpuCoreToCoreNs: seconds must be in (0, 60], got ", seconds);
  SINGA_CHECK(cpu_a != cpu_b, ValueError, "CpuCoreToCoreNs: needs two different CPUs, got ",
              cpu_a, " twice");
  AffinityGuard guard;
  for (int cpu : {cpu_a, cpu_b})
    SINGA_CHECK(guard.Has(cpu), ValueError, "CpuCoreToCoreNs: CPU ", cpu,
                " is not available to this thread (it may run on: ", guard.Describe(), ")");
  SINGA_CHECK(PinTo(cpu_a), Error, "CpuCoreToCoreNs: could not pin a thread to CPU ",
              cpu_a);

  // Batches of kBatch round trips, timed one by one; the median batch is
  // the answer, so a batch interrupted by the host does not count.
  constexpr int64_t kBatch = 1000;
  const Clock::time_point stop_at =
      Clock::now() +
      std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  // A partner that cannot run (its CPU taken away) ends the probe here
  // instead of hanging it.
  const Clock::time_point give_up = stop_at + std::chrono::seconds(2);
  Line line;
  std::atomic<bool> partner_pinned{true}, quit{false};
  std::thread partner([&] {
    if (!PinTo(cpu_b)) partner_pinned = false;
    // Answers every odd value with the next even one.
    for (int64_t v = 1; !quit.load(std::memory_order_relaxed); v += 2) {
      if (!WaitFor(line, v, give_up)) return;
      line.value.store(v + 1, std::memory_order_release);
    }
  });
  std::vector<double> batches;
  int64_t v = 0;
  bool timed_out = false;
  while (!timed_out && (batches.size() < 5 || Clock::now() < stop_at)) {
    const auto t0 = Clock::now();
    for (int64_t i = 0; i < kBatch; ++i) {
      line.value.store(v + 1, std::memory_order_release);
      v += 2;
      if (!WaitFor(line, v, give_up)) {
        timed_out = true;
        break;
      }
    }
    if (!timed_out)
      batches.push_back(std::chrono::duration<double, std::nano>(Clock::now() - t0).count() /
                        double(2 * kBatch));
  }
  quit = true;
  // The partner may be waiting for the next odd value.
  line.value.store(v + 1, std::memory_order_release);
  partner.join();
  SINGA_CHECK(partner_pinned, Error, "CpuCoreToCoreNs: could not pin a thread to CPU ",
              cpu_b);
  SINGA_CHECK(!timed_out, Error, "CpuCoreToCoreNs: the thread on CPU ", cpu_b,
              " stopped answering");
  std::nth_element(batches.begin(), batches.begin() + batches.size() / 2, batches.end());
  return batches[batches.size() / 2];
}

#else  // no thread pinning

double CpuCoreToCoreNs(int, int, double) {
  throw Error("CpuCoreToCoreNs: pinning threads to CPUs is supported on Linux only");
}

#endif

}  // namespace singa
