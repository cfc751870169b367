// NVML through dlopen: nvmlInit_v2, nvmlDeviceGetHandleByPciBusId_v2, nvmlDeviceGetClockInfo.
#include "backends/cuda/nvml_clocks.h"

#include <dlfcn.h>

namespace htam::cuda {
namespace {
constexpr int kNvmlClockSm = 1;   // NVML_CLOCK_SM
constexpr int kNvmlClockMem = 2;  // NVML_CLOCK_MEM
}  // namespace

NvmlClocks::NvmlClocks(const std::string& pci_bus_id, int peak_sm_khz, int peak_mem_khz)
    : peak_sm_mhz_(peak_sm_khz > 0 ? peak_sm_khz / 1000 : -1),
      peak_mem_mhz_(peak_mem_khz > 0 ? peak_mem_khz / 1000 : -1) {
  lib_ = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib_) {
    note_ = "NVML not found; reporting rated peak clocks";
    return;
  }
  auto init = reinterpret_cast<int (*)()>(dlsym(lib_, "nvmlInit_v2"));
  auto by_bus = reinterpret_cast<int (*)(const char*, void**)>(
      dlsym(lib_, "nvmlDeviceGetHandleByPciBusId_v2"));
  get_clock_ =
      reinterpret_cast<int (*)(void*, int, unsigned*)>(dlsym(lib_, "nvmlDeviceGetClockInfo"));
  shutdown_ = reinterpret_cast<int (*)()>(dlsym(lib_, "nvmlShutdown"));
  if (!init || !by_bus || !get_clock_ || init() != 0) {
    note_ = "NVML could not initialize; reporting rated peak clocks";
    dlclose(lib_);
    lib_ = nullptr;
    return;
  }
  void* dev = nullptr;
  if (by_bus(pci_bus_id.c_str(), &dev) != 0 || dev == nullptr) {
    note_ = "NVML has no device at " + pci_bus_id + "; reporting rated peak clocks";
    return;
  }
  device_ = dev;
}

NvmlClocks::~NvmlClocks() {
  if (lib_) {
    if (shutdown_) shutdown_();
    dlclose(lib_);
  }
}

ClockReading NvmlClocks::Read() const {
  ClockReading r;
  if (device_) {
    unsigned sm = 0, mem = 0;
    if (get_clock_(device_, kNvmlClockSm, &sm) == 0 &&
        get_clock_(device_, kNvmlClockMem, &mem) == 0) {
      r.sm_mhz = static_cast<int>(sm);
      r.mem_mhz = static_cast<int>(mem);
      r.current = true;
      return r;
    }
  }
  r.sm_mhz = peak_sm_mhz_;
  r.mem_mhz = peak_mem_mhz_;
  return r;
}

}  // namespace htam::cuda
