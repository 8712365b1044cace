// SINGA's device API names (apache/singa src/api/core_device.i) over
// singa's devices: Device.host(), Reset(), EnableLazyAlloc(), the Platform
// class of static functions, and the container templates. The graph
// methods (EnableGraph, RunGraph, ...) come with graph mode.
%include "std_pair.i"

%template(PairSizeT) std::pair<size_t, size_t>;
%template(VecPairSizeT) std::vector<std::pair<size_t, size_t>>;
%template(VecSharedPtrDevice) std::vector<std::shared_ptr<singa::Device>>;

// %runtime: the Tensor and Device extensions below are emitted where the
// classes are declared (core_*.i), before any %{ %} block of this file.
%runtime %{
#include "singa/core/device.h"
#include <type_traits>
#include <utility>

namespace singa {
namespace sw {

// Graph state is reset too when the Device has graph mode (the detection
// keeps this file independent of whether graph mode is compiled in).
template <typename D>
auto ResetGraphState(D* d, int) -> decltype(d->ResetGraph(), void()) {
  d->EnableGraph(false);
  d->ResetGraph();
  d->SetVerbosity(0);
}
template <typename D>
void ResetGraphState(D*, long) {}

constexpr const char* kNoOpenCL =
    "this singa build has no OpenCL support (singa runs on the CPU and on CUDA GPUs)";

// SINGA's Platform: static functions that query and create devices.
struct Platform {
  static int GetNumGPUs() { return singa::GetNumGPUs(); }
  static std::vector<int> GetGPUIDs() {
    std::vector<int> ids(static_cast<size_t>(singa::GetNumGPUs()));
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int>(i);
    return ids;
  }
  // (free, total) bytes of GPU device's memory, and of every visible GPU.
  static std::pair<size_t, size_t> GetGPUMemSize(int device) {
    std::vector<size_t> m = singa::GetGPUMemSize(device);
    return {m.at(0), m.at(1)};
  }
  static std::vector<std::pair<size_t, size_t>> GetGPUMemSize() {
    std::vector<std::pair<size_t, size_t>> all;
    for (int id : GetGPUIDs()) all.push_back(GetGPUMemSize(id));
    return all;
  }
  static std::string DeviceQuery(int id, bool verbose = false) {
    (void)verbose;  // the text is the same; Python's device_query prints it
    return singa::DeviceQuery(id);
  }
  static std::vector<std::shared_ptr<Device>> CreateCudaGPUs(int64_t num_devices,
                                                             int64_t init_size = 0) {
    SINGA_CHECK(num_devices >= 1, ValueError, "CreateCudaGPUs: need at least one device, got ",
                num_devices);
    std::vector<int> ids(static_cast<size_t>(num_devices));
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int>(i);
    return CreateCudaGPUsOn(ids, init_size);
  }
  // init_size (SINGA's initial memory pool) is checked and otherwise
  // unused: the caching allocator grows as needed.
  static std::vector<std::shared_ptr<Device>> CreateCudaGPUsOn(const std::vector<int>& devices,
                                                               int64_t init_size = 0) {
    SINGA_CHECK(!devices.empty(), ValueError, "CreateCudaGPUsOn: need at least one device id");
    SINGA_CHECK(init_size >= 0, ValueError, "CreateCudaGPUsOn: init_size must be >= 0, got ",
                init_size);
    std::vector<std::shared_ptr<Device>> out;
    for (int id : devices) {
      SINGA_CHECK(id >= 0, ValueError, "CreateCudaGPUsOn: GPU id must be >= 0, got ", id);
      out.push_back(singa::CreateCudaGPU(id));
    }
    return out;
  }
  static int GetNumOpenclPlatforms() { return 0; }
  static int GetNumOpenclDevices() { return 0; }
  static std::shared_ptr<Device> GetDefaultOpenclDevice() {
    SINGA_THROW(DeviceError, "GetDefaultOpenclDevice: ", kNoOpenCL);
  }
  static std::shared_ptr<Device> GetDefaultDevice() { return singa::DefaultDevice(); }
};

}  // namespace sw
}  // namespace singa
%}

%feature("compactdefaultargs") singa::sw::Platform::DeviceQuery;
%feature("compactdefaultargs") singa::sw::Platform::CreateCudaGPUs;
%feature("compactdefaultargs") singa::sw::Platform::CreateCudaGPUsOn;

%extend singa::Device {
  // The host device that serves this one: itself for a host device, the
  // default CPU device for a GPU.
  std::shared_ptr<singa::Device> host() {
    return $self->is_host() ? $self->shared_from_this() : singa::DefaultDevice();
  }
  // Waits for queued work and leaves graph mode with an empty graph.
  void Reset() {
    $self->Sync();
    singa::sw::ResetGraphState($self, 0);
  }
  // SINGA's switch for allocating memory at first use. It has no effect:
  // when a Block takes its memory is the device's decision (doc/design.md,
  // "Blocks and memory").
  static void EnableLazyAlloc(bool enable) { (void)enable; }
}

namespace singa {
namespace sw {
struct Platform {
  static int GetNumGPUs();
  static std::vector<int> GetGPUIDs();
  static std::pair<size_t, size_t> GetGPUMemSize(int device);
  static std::vector<std::pair<size_t, size_t>> GetGPUMemSize();
  static std::string DeviceQuery(int id, bool verbose = false);
  static std::vector<std::shared_ptr<singa::Device>> CreateCudaGPUs(int64_t num_devices,
                                                                    int64_t init_size = 0);
  static std::vector<std::shared_ptr<singa::Device>> CreateCudaGPUsOn(
      const std::vector<int>& devices, int64_t init_size = 0);
  static int GetNumOpenclPlatforms();
  static int GetNumOpenclDevices();
  static std::shared_ptr<singa::Device> GetDefaultOpenclDevice();
  static std::shared_ptr<singa::Device> GetDefaultDevice();
};
}  // namespace sw
}  // namespace singa
