// bgemm family: C[b] = A[b] B[b] for many small matrices. Knobs: SMEM, MPB, REG, UNROLL.
#include <htam/kernel_abi.h>
#include <cuda_runtime.h>

#define NTH 256
#if UNROLL
#define KUNROLL _Pragma("unroll 8")
#else
#define KUNROLL _Pragma("unroll 1")
#endif

__global__ void __launch_bounds__(NTH) bgemm(const float* __restrict__ A, const float* __restrict__ B,
                                             float* __restrict__ C, int batch, int M, int N, int K) {
  extern __shared__ float sh[];
  const int b0 = blockIdx.x * MPB;
  const int nmat = min(MPB, batch - b0);
#if SMEM
  const int sa = M * K, sb = K * N;
  for (int e = threadIdx.x; e < nmat * sa; e += NTH) sh[e] = A[(long)b0 * sa + e];
  for (int e = threadIdx.x; e < nmat * sb; e += NTH) sh[MPB * sa + e] = B[(long)b0 * sb + e];
  __syncthreads();
#endif
  const int ncol = N / REG;  // REG must divide N; any remainder columns stay unwritten
  const int per = M * ncol;
  for (int w = threadIdx.x; w < nmat * per; w += NTH) {
    int mi = w / per, r = (w % per) / ncol, c0 = (w % ncol) * REG;
#if SMEM
    const float* a = sh + mi * M * K + r * K;
    const float* bm = sh + MPB * M * K + mi * K * N;
#else
    const float* a = A + (long)(b0 + mi) * M * K + (long)r * K;
    const float* bm = B + (long)(b0 + mi) * K * N;
#endif
    float acc[REG];
#pragma unroll
    for (int j = 0; j < REG; ++j) acc[j] = 0.f;
    KUNROLL
    for (int k = 0; k < K; ++k) {
      float av = a[k];
#pragma unroll
      for (int j = 0; j < REG; ++j) acc[j] = fmaf(av, bm[k * N + c0 + j], acc[j]);
    }
    float* out = C + (long)(b0 + mi) * M * N + (long)r * N + c0;
#pragma unroll
    for (int j = 0; j < REG; ++j) out[j] = acc[j];
  }
}

HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream stream) {
  if (nin != 2 || nout != 1 || in[0].ndim != 3) return 1;
  int batch = (int)in[0].shape[0], M = (int)in[0].shape[1], K = (int)in[0].shape[2];
  int N = (int)in[1].shape[2];
  size_t smem = SMEM ? (size_t)MPB * (M * K + K * N) * sizeof(float) : 0;
  bgemm<<<(batch + MPB - 1) / MPB, NTH, smem, (cudaStream_t)stream>>>(
      (const float*)in[0].data, (const float*)in[1].data, (float*)out[0].data, batch, M, N, K);
  return cudaGetLastError() == cudaSuccess ? 0 : 2;
}
