// bf16_gemm reference for the CPU backend: bf16 decoded to float by bit shifting, products
// accumulated in double, result rounded to bf16 (round to nearest even).
#include <htam/kernel_abi.h>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

namespace {
float bf16_to_float(uint16_t v) {
  uint32_t bits = static_cast<uint32_t>(v) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}
uint16_t float_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);  // NaN
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}
}  // namespace

HTAM_KERNEL_ENTRY int htam_kernel(const htam_tensor* in, int nin, htam_tensor* out, int nout,
                                  htam_stream) {
  if (nin != 2 || nout != 1) return 1;
  const uint16_t* a = static_cast<const uint16_t*>(in[0].data);
  const uint16_t* b = static_cast<const uint16_t*>(in[1].data);
  uint16_t* c = static_cast<uint16_t*>(out[0].data);
  const int64_t m = in[0].shape[0], k = in[0].shape[1], n = in[1].shape[1];
  std::vector<float> bf(static_cast<size_t>(k * n));
  for (int64_t i = 0; i < k * n; ++i) bf[i] = bf16_to_float(b[i]);
  std::vector<double> acc(static_cast<size_t>(n));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) acc[j] = 0.0;
    for (int64_t p = 0; p < k; ++p) {
      const double av = bf16_to_float(a[i * k + p]);
      const float* brow = bf.data() + p * n;
      for (int64_t j = 0; j < n; ++j) acc[j] += av * brow[j];
    }
    for (int64_t j = 0; j < n; ++j) c[i * n + j] = float_to_bf16(static_cast<float>(acc[j]));
  }
  return 0;
}
