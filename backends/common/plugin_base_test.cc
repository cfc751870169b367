// The shared entry points of plugin_base.h on a small plugin defined here: the version check, the
// host's settings and options, Init's Status as an error of its class, describe up to the host's
// struct_size, exceptions kept inside.
#include "backends/common/plugin_base.h"

#include <gtest/gtest.h>

#include <stdexcept>

struct htam_backend : htam::plugin::Backend {
  explicit htam_backend(const htam::plugin::HostSettings& h) : Backend("toy", h) {
    if (h.Option("throw", "") == "1") throw std::runtime_error("probe failed");
    description_.language = "toy";
    description_.source_suffix = ".toy";
    description_.version = "toy 1";
    description_.can_run = true;
    htam_device_info d{};
    d.name = "toy device";
    description_.devices = {d};
  }
  htam::Status Init() override {
    if (host().Has("fail")) return htam::Status::Unavailable("no toy device here");
    return htam::Status::OK();
  }
};

HTAM_BACKEND_PLUGIN(htam_backend, "toy")

namespace {

htam_backend_host Host(const char* const* options) {
  htam_backend_host h{};
  h.struct_size = sizeof h;
  h.api_major = HTAM_BACKEND_API_VERSION_MAJOR;
  h.api_minor = HTAM_BACKEND_API_VERSION_MINOR;
  h.work_dir = "/tmp";
  h.options = options;
  return h;
}

TEST(PluginBase, InitializesWithTheHostsSettingsAndDescribes) {
  const char* opts[] = {"cxx=clang++", "noequals", "cxx=g++", nullptr};
  htam_backend_host h = Host(opts);
  htam_backend* b = nullptr;
  ASSERT_EQ(htam_backend_initialize(&h, &b), nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->host().Option("cxx", ""), "g++");  // the last one wins
  EXPECT_FALSE(b->host().Has("noequals"));
  EXPECT_EQ(b->host().work_dir, "/tmp");
  EXPECT_EQ(b->host().cache_dir, "");
  htam_backend_description d{};
  d.struct_size = sizeof d;
  ASSERT_EQ(htam_backend_describe(b, &d), nullptr);
  EXPECT_STREQ(d.name, "toy");
  EXPECT_STREQ(d.source_suffix, ".toy");
  EXPECT_EQ(d.num_devices, 1);
  EXPECT_STREQ(d.devices[0].name, "toy device");
  EXPECT_EQ(d.can_run, 1);
  // An older host's shorter struct: nothing is written past its struct_size.
  htam_backend_description small{};
  small.struct_size = offsetof(htam_backend_description, version);
  small.version = "untouched";
  ASSERT_EQ(htam_backend_describe(b, &small), nullptr);
  EXPECT_STREQ(small.language, "toy");
  EXPECT_STREQ(small.version, "untouched");
  htam_backend_finalize(b);
}

TEST(PluginBase, RefusesAnotherMajorOrAnOlderMinor) {
  htam_backend_host h = Host(nullptr);
  h.api_major = HTAM_BACKEND_API_VERSION_MAJOR + 1;
  htam_backend* b = nullptr;
  htam_backend_error* e = htam_backend_initialize(&h, &b);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->code, HTAM_ERR_VERSION);
  EXPECT_NE(std::string(e->message).find("toy backend built for API"), std::string::npos);
  htam_backend_error_free(e);
  h = Host(nullptr);
  h.api_minor = HTAM_BACKEND_API_VERSION_MINOR - 1;
  e = htam_backend_initialize(&h, &b);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->code, HTAM_ERR_VERSION);
  htam_backend_error_free(e);
  EXPECT_EQ(b, nullptr);
  uint32_t major = 0, minor = 0;
  htam_backend_api_version(&major, &minor);
  EXPECT_EQ(major, uint32_t(HTAM_BACKEND_API_VERSION_MAJOR));
  EXPECT_EQ(minor, uint32_t(HTAM_BACKEND_API_VERSION_MINOR));
}

TEST(PluginBase, InitFailuresAndExceptionsAreErrorsOfTheirClass) {
  const char* fail[] = {"fail=1", nullptr};
  htam_backend_host h = Host(fail);
  htam_backend* b = nullptr;
  htam_backend_error* e = htam_backend_initialize(&h, &b);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->code, HTAM_ERR_UNAVAILABLE);
  EXPECT_STREQ(e->message, "no toy device here");
  htam_backend_error_free(e);
  const char* boom[] = {"throw=1", nullptr};
  h = Host(boom);
  e = htam_backend_initialize(&h, &b);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->code, HTAM_ERR_INTERNAL);
  EXPECT_NE(std::string(e->message).find("probe failed"), std::string::npos);
  htam_backend_error_free(e);
  EXPECT_EQ(b, nullptr);
  e = htam_backend_initialize(nullptr, &b);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->code, HTAM_ERR_INVALID_ARGUMENT);
  htam_backend_error_free(e);
}

}  // namespace
