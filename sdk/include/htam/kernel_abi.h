/* htam kernel ABI: the one header a candidate kernel includes.
 *
 * A candidate is a source file in its backend's language (C++ for the CPU backend, CUDA C++ for
 * the CUDA backend, HIP for the HIP backend) that defines exactly one entry point:
 *
 *     HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* inputs, int num_inputs,
 *                                       htam_tensor* outputs, int num_outputs,
 *                                       htam_stream stream);
 *
 * - inputs/outputs are in the order of the task's specification (task.json); shapes are the
 *   shapes of this call (a task's shapes vary: seen and held-out), strides are in elements.
 * - data points to device memory for GPU backends, host memory for the CPU backend. Inputs are
 *   read-only: a candidate that changes them is rejected. Outputs must be fully written.
 * - stream is the backend's stream (cudaStream_t / hipStream_t; null for CPU). All device work
 *   must be ordered on it; the harness times every stream anyway.
 * - return 0 on success, non-zero on failure (the gate records it as a crash with that code).
 * - No global state may carry results across calls: the gate calls with fresh inputs, calls
 *   twice, and calls with shapes the candidate never saw.
 *
 * Worked example (CUDA, y = relu(x)):
 *
 *     #include <htam/kernel_abi.h>
 *     __global__ void relu(const float* x, float* y, long n) {
 *       long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
 *       if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
 *     }
 *     HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out,
 *                                       int nout, htam_stream stream) {
 *       long n = htam_numel(&in[0]);
 *       relu<<<(n + 255) / 256, 256, 0, (cudaStream_t)stream>>>(
 *           (const float*)in[0].data, (float*)out[0].data, n);
 *       return 0;
 *     }
 */
#ifndef HTAM_KERNEL_ABI_H_
#define HTAM_KERNEL_ABI_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HTAM_KERNEL_ABI_VERSION 1
#define HTAM_MAX_DIMS 8

typedef enum htam_dtype {
  HTAM_F32 = 0,
  HTAM_F16 = 1,
  HTAM_BF16 = 2,
  HTAM_F64 = 3,
  HTAM_I32 = 4,
  HTAM_I64 = 5,
  HTAM_U8 = 6,
  HTAM_I8 = 7,
  HTAM_BOOL = 8
} htam_dtype;

typedef struct htam_tensor {
  void* data;
  int32_t dtype; /* htam_dtype */
  int32_t ndim;
  int64_t shape[HTAM_MAX_DIMS];
  int64_t strides[HTAM_MAX_DIMS]; /* in elements; contiguous row-major unless the task says so */
} htam_tensor;

typedef void* htam_stream;

static inline int64_t htam_numel(const htam_tensor* t) {
  int64_t n = 1;
  for (int i = 0; i < t->ndim; ++i) n *= t->shape[i];
  return n;
}

static inline int htam_dtype_size(int32_t dtype) {
  switch (dtype) {
    case HTAM_F64:
    case HTAM_I64: return 8;
    case HTAM_F32:
    case HTAM_I32: return 4;
    case HTAM_F16:
    case HTAM_BF16: return 2;
    default: return 1;
  }
}

typedef int (*htam_kernel_fn)(const htam_tensor* inputs, int num_inputs, htam_tensor* outputs,
                              int num_outputs, htam_stream stream);

#ifdef __cplusplus
}
#define HTAM_KERNEL_ENTRY extern "C" __attribute__((visibility("default")))
#else
#define HTAM_KERNEL_ENTRY __attribute__((visibility("default")))
#endif

#endif /* HTAM_KERNEL_ABI_H_ */
