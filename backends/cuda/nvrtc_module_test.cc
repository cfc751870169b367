// NVRTC without a GPU: the backend's own device code (roofline probes, hold kernel) compiles for
// Hopper's arch-specific target, and compile errors come back as a log, not a crash.
#include "backends/cuda/nvrtc_module.h"

#include <gtest/gtest.h>

#include "backends/cuda/cuda_device.h"

namespace htam::cuda {
namespace {

TEST(Nvrtc, ProbesCompileForSm90a) {
  auto r = NvrtcCompile(ProbeSource(), "probes.cu", "sm_90a", {});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(r->ok) << r->log;
  EXPECT_GT(r->cubin.size(), 1000u);
  // An ELF image.
  EXPECT_EQ(r->cubin.substr(1, 3), "ELF");
  printf("NVRTC %s compiled the probes in %.0f ms\n", NvrtcVersion().c_str(), r->compile_ms);
}

TEST(Nvrtc, CompileErrorIsALog) {
  auto r = NvrtcCompile("extern \"C\" __global__ void k() { undefined_thing(); }", "bad.cu",
                        "sm_90a", {});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->ok);
  EXPECT_NE(r->log.find("undefined_thing"), std::string::npos) << r->log;
}

TEST(TensorExtent, FromShapeStridesAndDtype) {
  htam_tensor t{};
  t.dtype = HTAM_F16;
  t.ndim = 2;
  t.shape[0] = 3;
  t.shape[1] = 4;
  t.strides[0] = 8;  // padded rows
  t.strides[1] = 1;
  EXPECT_EQ(TensorExtentBytes(t), (2 * 8 + 3 + 1) * 2u);
  t.shape[1] = 0;
  EXPECT_EQ(TensorExtentBytes(t), 0u);
}

}  // namespace
}  // namespace htam::cuda
