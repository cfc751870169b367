// The one plugin search and the plugin file names it accepts.
#include "base/paths.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace htam {
namespace {

namespace fs = std::filesystem;

TEST(PluginBackendName, OnlyLibHtamBackendNameDotSo) {
  EXPECT_EQ(PluginBackendName("/x/libhtam_backend_cuda.so"), "cuda");
  EXPECT_EQ(PluginBackendName("libhtam_backend_cpu.so"), "cpu");
  EXPECT_EQ(PluginBackendName("/x/libhtam_backend_.so"), "");
  EXPECT_EQ(PluginBackendName("/x/libhtam_backend_cuda.so.1"), "");
  EXPECT_EQ(PluginBackendName("/x/libother.so"), "");
  EXPECT_EQ(PluginBackendName("/libhtam_backend_cuda.so/x"), "");
}

TEST(FindPlugins, AConfiguredFolderIsTheOnlyPlaceSearched) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("plugins_" + std::to_string(getpid()));
  fs::create_directories(dir);
  for (const char* n : {"libhtam_backend_cpu.so", "libhtam_backend_fake.so", "libz.so", "README"})
    std::ofstream(dir / n) << "x";
  const auto found = FindPlugins(dir.string());
  ASSERT_EQ(found.size(), 2u);
  EXPECT_EQ(found.at("cpu"), (dir / "libhtam_backend_cpu.so").string());
  EXPECT_EQ(found.at("fake"), (dir / "libhtam_backend_fake.so").string());
  EXPECT_TRUE(FindPlugins((dir / "missing").string()).empty());
  fs::remove_all(dir);
}

TEST(ExecutablePath, IsThisTestBinary) {
  EXPECT_EQ(fs::path(ExecutablePath()).filename(), "base_test");
  EXPECT_EQ(fs::path(ExecutablePath()).parent_path().string(), ExecutableDir());
}

TEST(FindExecutable, AnUnknownNameIsEmpty) {
  EXPECT_EQ(FindExecutable("htam-no-such-binary"), "");
}

}  // namespace
}  // namespace htam
