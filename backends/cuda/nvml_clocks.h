// Reads (never sets) a GPU's current SM and memory clocks through NVML, loaded with dlopen so that
// the plugin has no link-time dependency on the driver's libnvidia-ml.so.1. When NVML is absent
// the peak clocks from cudaDeviceGetAttribute are reported instead (marked as such).
// Thread-safety: an NvmlClocks is used from one thread at a time (the plugin's device thread).
#pragma once

#include <string>

namespace htam::cuda {

struct ClockReading {
  int sm_mhz = -1;
  int mem_mhz = -1;
  bool current = false;  // true: NVML's current clocks; false: the device's rated peak
};

class NvmlClocks {
 public:
  // pci_bus_id from cudaDeviceGetPCIBusId; peak clocks (kHz) from cudaDeviceGetAttribute.
  NvmlClocks(const std::string& pci_bus_id, int peak_sm_khz, int peak_mem_khz);
  ~NvmlClocks();
  NvmlClocks(const NvmlClocks&) = delete;
  NvmlClocks& operator=(const NvmlClocks&) = delete;

  ClockReading Read() const;
  bool have_nvml() const { return device_ != nullptr; }
  const std::string& note() const { return note_; }

 private:
  void* lib_ = nullptr;
  void* device_ = nullptr;  // nvmlDevice_t
  int (*get_clock_)(void*, int, unsigned*) = nullptr;
  int (*shutdown_)() = nullptr;
  int peak_sm_mhz_, peak_mem_mhz_;
  std::string note_;
};

}  // namespace htam::cuda
