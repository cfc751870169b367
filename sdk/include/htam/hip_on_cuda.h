/* htam HIP-on-CUDA compatibility layer: lets a HIP candidate compile with nvcc and run on NVIDIA
 * GPUs, in place of HIP's own NVIDIA platform headers (Debian's HIP 5.2 ones no longer compile
 * against CUDA 13: cudaMemLocation changes and removed cudaDeviceProp fields).
 *
 * How it is used (the HIP backend does this itself when its platform is NVIDIA):
 *     nvcc -x cu -include htam/hip_on_cuda.h -I<shim dir> ...
 * where <shim dir> holds hip/hip_runtime.h, hip/hip_fp16.h, ... that only include this header
 * (the plugin writes them; docs/backends-hip.md shows them).
 *
 * It maps the subset of HIP that kernel candidates use (docs/backends-hip.md lists it): launches
 * (hipLaunchKernelGGL and <<<>>>), thread indexing, barriers, warp shuffles and votes with HIP's
 * mask-less spellings, streams, events, memory, errors, device queries, __half / bf16 basics,
 * atomics and shared-memory declarations. Anything outside the subset is a compile error that
 * names the HIP identifier, as it would be on a HIP installation that lacks it.
 *
 * Semantics to keep in mind: warpSize is 32 here (64 on most AMD GPUs) — portable candidates read
 * warpSize instead of writing 32 or 64. The mask-less __shfl* / __ballot / __any / __all of HIP are
 * mapped to the *_sync forms with a full mask, exactly as HIP's NVIDIA platform does: every lane of
 * the warp must take part (no divergent calls).
 */
#ifndef HTAM_HIP_ON_CUDA_H_
#define HTAM_HIP_ON_CUDA_H_

#if !defined(__CUDACC__)
#error "htam/hip_on_cuda.h is for nvcc (CUDA C++); on AMD compile HIP with hipcc"
#endif

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#define HTAM_HIP_ON_CUDA 1
#ifndef __HIP_PLATFORM_NVIDIA__
#define __HIP_PLATFORM_NVIDIA__ 1
#endif
#ifndef __HIP_PLATFORM_NVCC__
#define __HIP_PLATFORM_NVCC__ 1 /* the pre-5.0 spelling, still tested by older code */
#endif
#ifndef __HIPCC__
#define __HIPCC__ 1
#endif
/* The HIP release whose API this layer follows. */
#define HIP_VERSION_MAJOR 5
#define HIP_VERSION_MINOR 2
#define HIP_VERSION_PATCH 0
#define HIP_VERSION (HIP_VERSION_MAJOR * 10000000 + HIP_VERSION_MINOR * 100000 + HIP_VERSION_PATCH)

/* ---- errors ------------------------------------------------------------------------------- */
typedef cudaError_t hipError_t;
#define hipSuccess cudaSuccess
#define hipErrorInvalidValue cudaErrorInvalidValue
#define hipErrorOutOfMemory cudaErrorMemoryAllocation
#define hipErrorMemoryAllocation cudaErrorMemoryAllocation
#define hipErrorNotReady cudaErrorNotReady
#define hipErrorNoDevice cudaErrorNoDevice
#define hipErrorInvalidDevice cudaErrorInvalidDevice
#define hipErrorInvalidConfiguration cudaErrorInvalidConfiguration
#define hipErrorLaunchFailure cudaErrorLaunchFailure
#define hipErrorIllegalAddress cudaErrorIllegalAddress
#define hipErrorInvalidDeviceFunction cudaErrorInvalidDeviceFunction
#define hipErrorNotSupported cudaErrorNotSupported

static inline const char* hipGetErrorString(hipError_t e) {
  return cudaGetErrorString(e);
}
static inline const char* hipGetErrorName(hipError_t e) {
  return cudaGetErrorName(e);
}
static inline hipError_t hipGetLastError(void) {
  return cudaGetLastError();
}
static inline hipError_t hipPeekAtLastError(void) {
  return cudaPeekAtLastError();
}

/* ---- devices ------------------------------------------------------------------------------ */
typedef cudaDeviceProp hipDeviceProp_t;
typedef cudaFuncAttributes hipFuncAttributes;
static inline hipError_t hipGetDevice(int* d) {
  return cudaGetDevice(d);
}
static inline hipError_t hipSetDevice(int d) {
  return cudaSetDevice(d);
}
static inline hipError_t hipGetDeviceCount(int* n) {
  return cudaGetDeviceCount(n);
}
static inline hipError_t hipGetDeviceProperties(hipDeviceProp_t* p, int d) {
  return cudaGetDeviceProperties(p, d);
}
static inline hipError_t hipDeviceSynchronize(void) {
  return cudaDeviceSynchronize();
}
static inline hipError_t hipDeviceReset(void) {
  return cudaDeviceReset();
}

typedef enum hipDeviceAttribute_t {
  hipDeviceAttributeMaxThreadsPerBlock = cudaDevAttrMaxThreadsPerBlock,
  hipDeviceAttributeMaxBlockDimX = cudaDevAttrMaxBlockDimX,
  hipDeviceAttributeMaxGridDimX = cudaDevAttrMaxGridDimX,
  hipDeviceAttributeMaxSharedMemoryPerBlock = cudaDevAttrMaxSharedMemoryPerBlock,
  hipDeviceAttributeSharedMemPerBlockOptin = cudaDevAttrMaxSharedMemoryPerBlockOptin,
  hipDeviceAttributeWarpSize = cudaDevAttrWarpSize,
  hipDeviceAttributeMultiprocessorCount = cudaDevAttrMultiProcessorCount,
  hipDeviceAttributeMaxThreadsPerMultiProcessor = cudaDevAttrMaxThreadsPerMultiProcessor,
  hipDeviceAttributeMaxRegistersPerBlock = cudaDevAttrMaxRegistersPerBlock,
  hipDeviceAttributeL2CacheSize = cudaDevAttrL2CacheSize,
  hipDeviceAttributeComputeCapabilityMajor = cudaDevAttrComputeCapabilityMajor,
  hipDeviceAttributeComputeCapabilityMinor = cudaDevAttrComputeCapabilityMinor
} hipDeviceAttribute_t;
static inline hipError_t hipDeviceGetAttribute(int* v, hipDeviceAttribute_t a, int d) {
  return cudaDeviceGetAttribute(v, static_cast<cudaDeviceAttr>(a), d);
}

typedef enum hipFuncAttribute {
  hipFuncAttributeMaxDynamicSharedMemorySize = cudaFuncAttributeMaxDynamicSharedMemorySize,
  hipFuncAttributePreferredSharedMemoryCarveout = cudaFuncAttributePreferredSharedMemoryCarveout
} hipFuncAttribute;
template <typename F>
static inline hipError_t hipFuncSetAttribute(F* func, hipFuncAttribute attr, int value) {
  return cudaFuncSetAttribute(func, static_cast<cudaFuncAttribute>(attr), value);
}
static inline hipError_t hipFuncSetAttribute(const void* func, hipFuncAttribute attr, int value) {
  return cudaFuncSetAttribute(func, static_cast<cudaFuncAttribute>(attr), value);
}
template <typename F>
static inline hipError_t hipFuncGetAttributes(hipFuncAttributes* a, F* func) {
  return cudaFuncGetAttributes(a, func);
}
template <typename F>
static inline hipError_t hipOccupancyMaxActiveBlocksPerMultiprocessor(int* n, F func, int block,
                                                                      size_t dyn_shared) {
  return cudaOccupancyMaxActiveBlocksPerMultiprocessor(n, func, block, dyn_shared);
}

/* ---- streams and events ------------------------------------------------------------------- */
typedef cudaStream_t hipStream_t;
typedef cudaEvent_t hipEvent_t;
#define hipStreamDefault cudaStreamDefault
#define hipStreamNonBlocking cudaStreamNonBlocking
#define hipStreamPerThread cudaStreamPerThread
#define hipEventDefault cudaEventDefault
#define hipEventDisableTiming cudaEventDisableTiming
#define hipEventBlockingSync cudaEventBlockingSync
static inline hipError_t hipStreamCreate(hipStream_t* s) {
  return cudaStreamCreate(s);
}
static inline hipError_t hipStreamCreateWithFlags(hipStream_t* s, unsigned flags) {
  return cudaStreamCreateWithFlags(s, flags);
}
static inline hipError_t hipStreamDestroy(hipStream_t s) {
  return cudaStreamDestroy(s);
}
static inline hipError_t hipStreamSynchronize(hipStream_t s) {
  return cudaStreamSynchronize(s);
}
static inline hipError_t hipStreamWaitEvent(hipStream_t s, hipEvent_t e, unsigned flags) {
  return cudaStreamWaitEvent(s, e, flags);
}
static inline hipError_t hipStreamQuery(hipStream_t s) {
  return cudaStreamQuery(s);
}
static inline hipError_t hipEventCreate(hipEvent_t* e) {
  return cudaEventCreate(e);
}
static inline hipError_t hipEventCreateWithFlags(hipEvent_t* e, unsigned flags) {
  return cudaEventCreateWithFlags(e, flags);
}
static inline hipError_t hipEventRecord(hipEvent_t e, hipStream_t s = 0) {
  return cudaEventRecord(e, s);
}
static inline hipError_t hipEventSynchronize(hipEvent_t e) {
  return cudaEventSynchronize(e);
}
static inline hipError_t hipEventQuery(hipEvent_t e) {
  return cudaEventQuery(e);
}
static inline hipError_t hipEventElapsedTime(float* ms, hipEvent_t a, hipEvent_t b) {
  return cudaEventElapsedTime(ms, a, b);
}
static inline hipError_t hipEventDestroy(hipEvent_t e) {
  return cudaEventDestroy(e);
}

/* ---- memory ------------------------------------------------------------------------------- */
typedef enum hipMemcpyKind {
  hipMemcpyHostToHost = cudaMemcpyHostToHost,
  hipMemcpyHostToDevice = cudaMemcpyHostToDevice,
  hipMemcpyDeviceToHost = cudaMemcpyDeviceToHost,
  hipMemcpyDeviceToDevice = cudaMemcpyDeviceToDevice,
  hipMemcpyDefault = cudaMemcpyDefault
} hipMemcpyKind;
typedef void* hipDeviceptr_t;

template <typename T>
static inline hipError_t hipMalloc(T** p, size_t bytes) {
  return cudaMalloc(reinterpret_cast<void**>(p), bytes);
}
template <typename T>
static inline hipError_t hipMallocAsync(T** p, size_t bytes, hipStream_t s) {
  return cudaMallocAsync(reinterpret_cast<void**>(p), bytes, s);
}
template <typename T>
static inline hipError_t hipHostMalloc(T** p, size_t bytes, unsigned /*flags*/ = 0) {
  return cudaMallocHost(reinterpret_cast<void**>(p), bytes);
}
static inline hipError_t hipFree(void* p) {
  return cudaFree(p);
}
static inline hipError_t hipFreeAsync(void* p, hipStream_t s) {
  return cudaFreeAsync(p, s);
}
static inline hipError_t hipHostFree(void* p) {
  return cudaFreeHost(p);
}
static inline hipError_t hipMemcpy(void* d, const void* s, size_t n, hipMemcpyKind k) {
  return cudaMemcpy(d, s, n, static_cast<cudaMemcpyKind>(k));
}
static inline hipError_t hipMemcpyAsync(void* d, const void* s, size_t n, hipMemcpyKind k,
                                        hipStream_t st = 0) {
  return cudaMemcpyAsync(d, s, n, static_cast<cudaMemcpyKind>(k), st);
}
static inline hipError_t hipMemset(void* d, int v, size_t n) {
  return cudaMemset(d, v, n);
}
static inline hipError_t hipMemsetAsync(void* d, int v, size_t n, hipStream_t s = 0) {
  return cudaMemsetAsync(d, v, n, s);
}
static inline hipError_t hipMemGetInfo(size_t* free_bytes, size_t* total) {
  return cudaMemGetInfo(free_bytes, total);
}
#define HIP_SYMBOL(x) x
template <typename T>
static inline hipError_t hipMemcpyToSymbol(const T& sym, const void* src, size_t n,
                                           size_t offset = 0,
                                           hipMemcpyKind k = hipMemcpyHostToDevice) {
  return cudaMemcpyToSymbol(sym, src, n, offset, static_cast<cudaMemcpyKind>(k));
}
template <typename T>
static inline hipError_t hipMemcpyToSymbolAsync(const T& sym, const void* src, size_t n,
                                                size_t offset, hipMemcpyKind k, hipStream_t s) {
  return cudaMemcpyToSymbolAsync(sym, src, n, offset, static_cast<cudaMemcpyKind>(k), s);
}

/* ---- launches ----------------------------------------------------------------------------- */
/* The kernel name is parenthesized as in HIP's NVIDIA platform: a template kernel with several
 * arguments is written HIP_KERNEL_NAME(k<a, b>). */
#define HIP_KERNEL_NAME(...) __VA_ARGS__
#define hipLaunchKernelGGL(kernel, grid, block, shmem, stream, ...) \
  (kernel)<<<(grid), (block), (shmem), (stream)>>>(__VA_ARGS__)

/* ---- kernel side: indexing, shared memory, barriers --------------------------------------- */
#define hipThreadIdx_x threadIdx.x
#define hipThreadIdx_y threadIdx.y
#define hipThreadIdx_z threadIdx.z
#define hipBlockIdx_x blockIdx.x
#define hipBlockIdx_y blockIdx.y
#define hipBlockIdx_z blockIdx.z
#define hipBlockDim_x blockDim.x
#define hipBlockDim_y blockDim.y
#define hipBlockDim_z blockDim.z
#define hipGridDim_x gridDim.x
#define hipGridDim_y gridDim.y
#define hipGridDim_z gridDim.z
#define HIP_DYNAMIC_SHARED(type, var) extern __shared__ type var[];
#define HIP_DYNAMIC_SHARED_ATTRIBUTE

/* The lane of the calling thread inside its warp (HIP's __lane_id()). */
static __device__ __forceinline__ unsigned int __lane_id(void) {
  unsigned int lane;
  asm volatile("mov.u32 %0, %%laneid;" : "=r"(lane));
  return lane;
}

/* HIP's mask-less warp operations (defined after CUDA's headers, which declare deprecated
 * mask-less versions of their own for the host pass). Full-warp participation required. */
#define __shfl(...) __shfl_sync(0xffffffffu, __VA_ARGS__)
#define __shfl_up(...) __shfl_up_sync(0xffffffffu, __VA_ARGS__)
#define __shfl_down(...) __shfl_down_sync(0xffffffffu, __VA_ARGS__)
#define __shfl_xor(...) __shfl_xor_sync(0xffffffffu, __VA_ARGS__)
/* HIP's __ballot returns a 64-bit mask (a wavefront may hold 64 lanes). */
#define __ballot(pred) (static_cast<unsigned long long>(__ballot_sync(0xffffffffu, (pred))))
#define __any(pred) __any_sync(0xffffffffu, (pred))
#define __all(pred) __all_sync(0xffffffffu, (pred))

/* ---- numeric types ------------------------------------------------------------------------ */
/* __half, __half2 and their intrinsics come from cuda_fp16.h with the same names as in HIP. */
typedef __nv_bfloat16 __hip_bfloat16;
typedef __nv_bfloat162 __hip_bfloat162;

/* HIP's hip_bfloat16: a 16-bit storage type converted to and from float (round to nearest even),
 * layout-compatible with the task's bf16 tensors. */
struct hip_bfloat16 {
  uint16_t data;
  __host__ __device__ hip_bfloat16() : data(0) {}
  __host__ __device__ hip_bfloat16(float f) : data(Round(f)) {}
  __host__ __device__ operator float() const {
    union {
      uint32_t u;
      float f;
    } v;
    v.u = static_cast<uint32_t>(data) << 16;
    return v.f;
  }
  __host__ __device__ static uint16_t Round(float f) {
    union {
      uint32_t u;
      float f;
    } v;
    v.f = f;
    if ((v.u & 0x7f800000u) == 0x7f800000u && (v.u & 0x007fffffu)) {
      return static_cast<uint16_t>((v.u >> 16) | 0x40);  // quiet NaN
    }
    v.u += 0x7fffu + ((v.u >> 16) & 1u);
    return static_cast<uint16_t>(v.u >> 16);
  }
};

#endif /* HTAM_HIP_ON_CUDA_H_ */
