// NVRTC without a GPU: the backend's own device code (roofline probes, hold kernel) compiles for
// Hopper's arch-specific target, and compile errors come back as a log, not a crash.
#include "backends/cuda/nvrtc_module.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

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

// A new worker loads the backend's kernels from the cache instead of compiling them again; an
// entry that is not a cubin is compiled again (and replaced); a cache it cannot write is unused.
TEST(Nvrtc, CubinsAreKeptInTheCacheAndFoundByContent) {
  char tmpl[] = "/tmp/htam-nvrtc-cache-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  SetNvrtcCacheDir(dir);
  auto first = NvrtcCompile(ProbeSource(), "probes.cu", "sm_90a", {});
  ASSERT_TRUE(first.ok() && first->ok);
  EXPECT_GT(first->compile_ms, 0) << "the first compile ran NVRTC";
  std::vector<std::string> entries;
  for (const auto& e : std::filesystem::directory_iterator(dir + "/cuda"))
    entries.push_back(e.path().string());
  ASSERT_EQ(entries.size(), 1u) << "one cubin, no temporary file left";
  auto again = NvrtcCompile(ProbeSource(), "probes.cu", "sm_90a", {});
  ASSERT_TRUE(again.ok() && again->ok);
  EXPECT_EQ(again->compile_ms, 0) << "compiled again instead of reading the cache";
  EXPECT_EQ(again->cubin, first->cubin);
  // Other options are another entry.
  auto other = NvrtcCompile(ProbeSource(), "probes.cu", "sm_90a", {"-DHTAM_OTHER=1"});
  ASSERT_TRUE(other.ok() && other->ok);
  EXPECT_GT(other->compile_ms, 0);
  // A damaged entry is not loaded: compiled again, and the entry repaired.
  { std::ofstream(entries[0], std::ios::trunc) << "not a cubin"; }
  auto repaired = NvrtcCompile(ProbeSource(), "probes.cu", "sm_90a", {});
  ASSERT_TRUE(repaired.ok() && repaired->ok);
  EXPECT_GT(repaired->compile_ms, 0);
  EXPECT_EQ(repaired->cubin, first->cubin);
  auto reread = NvrtcCompile(ProbeSource(), "probes.cu", "sm_90a", {});
  EXPECT_EQ(reread->compile_ms, 0);
  // No cache: every compile runs NVRTC.
  SetNvrtcCacheDir("");
  auto none = NvrtcCompile(ProbeSource(), "probes.cu", "sm_90a", {});
  ASSERT_TRUE(none.ok() && none->ok);
  EXPECT_GT(none->compile_ms, 0);
  std::filesystem::remove_all(dir);
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
