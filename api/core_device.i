// Devices: the default CPU device, extra CPU devices, and the CUDA entry
// points (which raise RuntimeError in a build without CUDA).
%shared_ptr(singa::Device)
%shared_ptr(singa::CppCPU)

namespace singa {

class Device {
 public:
  virtual void Sync();
  virtual void SetRandSeed(unsigned seed);
  int id() const;
  virtual bool is_host() const;
  virtual std::string lang() const;
  virtual std::string name() const;
 protected:
  Device(int id);
};

class CppCPU : public Device {
 public:
  CppCPU();
};

std::shared_ptr<Device> DefaultDevice();
void SetNumThreads(int n);
int GetNumThreads();
bool HasCuda();
int GetNumGPUs();
std::shared_ptr<Device> CreateCudaGPU(int id);
std::string DeviceQuery(int id);
std::vector<size_t> GetGPUMemSize(int id);
void SetAllowTF32(const std::shared_ptr<Device>& dev, bool allow);
bool GetAllowTF32(const std::shared_ptr<Device>& dev);

}  // namespace singa
