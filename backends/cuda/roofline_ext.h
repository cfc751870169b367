/* CUDA backend extension to the plugin ABI (proposed for backend.h as an OPTIONAL entry point of
 * minor 1): the speed-of-light ceilings the plugin measured when the device was opened, so that
 * the host can compute Profile.sol_fraction from a task's FLOPs and bytes and flag results faster
 * than speed-of-light. Exported under the htam_backend_ prefix (backends/common/plugin.map).
 * Same rules as backend.h: struct_size set by the host, fields filled only inside it. */
#ifndef HTAM_BACKEND_CUDA_ROOFLINE_EXT_H_
#define HTAM_BACKEND_CUDA_ROOFLINE_EXT_H_

#include "htam/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct htam_roofline_report {
  uint32_t struct_size;    /* set by the host */
  double copy_bytes_per_s; /* large device-to-device copy, bytes read + written; 0 unknown */
  double fp32_flops;       /* FMA-bound probe kernel; 0 unknown */
  double tensor16_flops;   /* bf16 tensor-core (mma.sync) probe; 0 unknown */
  int32_t sm_clock_mhz;    /* clocks read after the probes; -1 unknown */
  int32_t mem_clock_mhz;
} htam_roofline_report;

/* OPTIONAL. Ceilings of an opened device (measured once at device_open). */
HTAM_BACKEND_EXPORT htam_backend_error* htam_backend_device_roofline(htam_device* device,
                                                                     htam_roofline_report* out);
typedef htam_backend_error* (*htam_backend_device_roofline_fn)(htam_device*, htam_roofline_report*);

#ifdef __cplusplus
}
#endif

#endif /* HTAM_BACKEND_CUDA_ROOFLINE_EXT_H_ */
