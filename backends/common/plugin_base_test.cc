// The entry points HTAM_BACKEND_PLUGIN emits, on a small plugin defined here (host memory, no
// compiler): the version check, the host's settings and options, Init's Status as an error of its
// class, describe up to the host's struct_size; the per-call entry points' argument and range
// checks (the device logic is not reached), results written only up to the host's struct_size,
// an imported descriptor closed whatever happened, and exceptions kept inside.
#include "backends/common/plugin_base.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <stdexcept>
#include <vector>

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
  htam::plugin::Error Compile(const htam_compile_request&, std::string_view source,
                              htam_artifact** out);
  htam::plugin::Error OpenDevice(int32_t index, htam_device** out);
  int device_calls = 0;  // device logic reached (the entry points' checks passed)
};

struct htam_artifact {
  std::string source;
  htam::plugin::Error Info(htam_artifact_info* i) const {
    i->path = "toy.so";
    i->diagnostics = "";
    i->compile_ms = 1.5;
    return nullptr;
  }
};

struct htam_module {
  htam::plugin::Error Run(const htam_tensor*, int32_t, htam_tensor*, int32_t, int32_t* rc) {
    if (rc) *rc = 7;
    return htam::plugin::MakeError(HTAM_ERR_KERNEL_FAILED, "htam_kernel returned 7");
  }
  htam::plugin::Error Time(const htam_timing_request& r, htam_timing_result* res) {
    for (int i = 0; i < r.repetitions && res->rep_us; ++i) res->rep_us[i] = 1.0;
    res->warmup_done = r.warmup_reps;
    res->sm_clock_mhz = int32_t(r.call_timeout_ms);  // 0 when the host's struct lacks the field
    return nullptr;
  }
};

struct htam_buffer {
  htam_backend* backend;
  std::vector<uint8_t> data;
  uint64_t bytes;
  explicit htam_buffer(htam_backend* b, uint64_t n) : backend(b), data(n), bytes(n) {}
  void* Address() { return data.data(); }
  htam::plugin::Error CopyToDevice(uint64_t offset, const void* src, uint64_t n) {
    ++backend->device_calls;
    std::memcpy(data.data() + offset, src, n);
    return nullptr;
  }
  htam::plugin::Error CopyToHost(void* dst, uint64_t offset, uint64_t n) {
    ++backend->device_calls;
    std::memcpy(dst, data.data() + offset, n);
    return nullptr;
  }
  htam::plugin::Error Memset(uint64_t offset, uint8_t value, uint64_t n) {
    ++backend->device_calls;
    if (value == 0xEE) throw std::bad_alloc();
    if (value == 0xEF) throw std::runtime_error("device logic threw");
    std::memset(data.data() + offset, value, n);
    return nullptr;
  }
  htam::plugin::Error Export(htam_buffer_handle*) {
    return htam::plugin::MakeError(HTAM_ERR_UNSUPPORTED, "toy buffers are not shared");
  }
};

struct htam_device {
  htam_backend* backend;
  htam_stream Stream() { return nullptr; }
  htam::plugin::Error Load(const htam_artifact&, htam_module** out) {
    *out = new htam_module;
    return nullptr;
  }
  htam::plugin::Error Alloc(uint64_t bytes, htam_buffer** out) {
    *out = new htam_buffer(backend, bytes);
    return nullptr;
  }
  htam::plugin::Error Roofline(htam_roofline_report* r) {
    r->copy_bytes_per_s = 1e12;
    r->fp32_flops = 2e12;
    r->tensor16_flops = 3e12;
    r->sm_clock_mhz = 1000;
    return nullptr;
  }
  htam::plugin::Error Import(const htam_buffer_handle& h, htam_buffer** out) {
    if (h.bytes == 0) return htam::plugin::MakeError(HTAM_ERR_INVALID_ARGUMENT, "empty");
    *out = new htam_buffer(backend, h.bytes);
    return nullptr;
  }
};

htam::plugin::Error htam_backend::Compile(const htam_compile_request&, std::string_view source,
                                          htam_artifact** out) {
  *out = new htam_artifact{std::string(source)};
  return nullptr;
}
htam::plugin::Error htam_backend::OpenDevice(int32_t index, htam_device** out) {
  if (index != 0) return htam::plugin::MakeError(HTAM_ERR_INVALID_ARGUMENT, "only device 0");
  *out = new htam_device{this};
  return nullptr;
}

HTAM_BACKEND_PLUGIN(htam_backend, "toy", ROOFLINE, SHARING)

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

// An opened toy device, with a 64-byte buffer.
struct Toy {
  htam_backend* b = nullptr;
  htam_device* d = nullptr;
  htam_buffer* buf = nullptr;
  Toy() {
    htam_backend_host h = Host(nullptr);
    EXPECT_EQ(htam_backend_initialize(&h, &b), nullptr);
    EXPECT_EQ(htam_backend_device_open(b, 0, &d), nullptr);
    EXPECT_EQ(htam_backend_buffer_alloc(d, 64, &buf), nullptr);
  }
  ~Toy() {
    htam_backend_buffer_free(buf);
    htam_backend_device_close(d);
    htam_backend_finalize(b);
  }
};

// The error's code (and frees it); -1 for success.
int CodeOf(htam_backend_error* e, std::string* message = nullptr) {
  if (!e) return -1;
  int code = e->code;
  if (message) *message = e->message;
  htam_backend_error_free(e);
  return code;
}

TEST(PluginEntries, CopiesOutsideABufferAreRefusedBeforeTheDeviceLogic) {
  Toy t;
  char host[16] = "0123456789abcde";
  std::string msg;
  EXPECT_EQ(CodeOf(htam_backend_copy_to_device(t.buf, 60, host, 8), &msg),
            HTAM_ERR_INVALID_ARGUMENT);
  EXPECT_NE(msg.find("range [60, +8) outside a buffer of 64 bytes"), std::string::npos) << msg;
  EXPECT_EQ(CodeOf(htam_backend_copy_to_host(host, t.buf, UINT64_MAX, 2)),
            HTAM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(CodeOf(htam_backend_memset(t.buf, 0, 1, 65)), HTAM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(CodeOf(htam_backend_copy_to_device(t.buf, 0, nullptr, 4)), HTAM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(CodeOf(htam_backend_copy_to_device(nullptr, 0, host, 4)), HTAM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(CodeOf(htam_backend_copy_to_device(t.buf, 64, nullptr, 0)), -1);  // empty: nothing
  EXPECT_EQ(t.b->device_calls, 0);
  // In range, the device logic runs and the bytes round-trip.
  ASSERT_EQ(CodeOf(htam_backend_copy_to_device(t.buf, 56, host, 8)), -1);
  char back[8] = {};
  ASSERT_EQ(CodeOf(htam_backend_copy_to_host(back, t.buf, 56, 8)), -1);
  EXPECT_EQ(std::string(back, 8), "01234567");
  EXPECT_EQ(t.b->device_calls, 2);
}

TEST(PluginEntries, AnExceptionInDeviceLogicIsAnErrorOfTheEntryPoint) {
  Toy t;
  std::string msg;
  EXPECT_EQ(CodeOf(htam_backend_memset(t.buf, 0, 0xEF, 4), &msg), HTAM_ERR_INTERNAL);
  EXPECT_EQ(msg, "memset: device logic threw");
  EXPECT_EQ(CodeOf(htam_backend_memset(t.buf, 0, 0xEE, 4), &msg), HTAM_ERR_OUT_OF_MEMORY);
  EXPECT_EQ(msg, "memset: out of host memory");
}

TEST(PluginEntries, ResultsAreWrittenOnlyUpToTheHostsStructSize) {
  Toy t;
  // An older host's roofline report without the clocks: they keep the host's values.
  htam_roofline_report r{};
  r.struct_size = offsetof(htam_roofline_report, sm_clock_mhz);
  r.sm_clock_mhz = -1;
  ASSERT_EQ(CodeOf(htam_backend_device_roofline(t.d, &r)), -1);
  EXPECT_EQ(r.copy_bytes_per_s, 1e12);
  EXPECT_EQ(r.tensor16_flops, 3e12);
  EXPECT_EQ(r.sm_clock_mhz, -1);
  EXPECT_EQ(r.struct_size, offsetof(htam_roofline_report, sm_clock_mhz));
  // A timing request without call_timeout_ms reads it as 0; the host's rep_us array is filled.
  htam_artifact* a = nullptr;
  htam_compile_request c{};
  c.struct_size = sizeof c;
  c.source = "k";
  c.source_len = 1;
  ASSERT_EQ(CodeOf(htam_backend_compile(t.b, &c, &a)), -1);
  htam_artifact_info info{};
  info.struct_size = offsetof(htam_artifact_info, compile_ms);
  info.compile_ms = -2;
  ASSERT_EQ(CodeOf(htam_backend_artifact_info(a, &info)), -1);
  EXPECT_STREQ(info.path, "toy.so");
  EXPECT_EQ(info.compile_ms, -2);
  htam_module* m = nullptr;
  ASSERT_EQ(CodeOf(htam_backend_load(t.d, a, &m)), -1);
  htam_timing_request q{};
  q.struct_size = offsetof(htam_timing_request, call_timeout_ms);
  q.repetitions = 3;
  q.warmup_reps = 2;
  q.call_timeout_ms = 5000;  // beyond the host's struct_size: not sent
  double reps[3] = {};
  htam_timing_result res{};
  res.struct_size = sizeof res;
  res.rep_us = reps;
  res.sm_clock_mhz = -1;
  ASSERT_EQ(CodeOf(htam_backend_time(m, &q, &res)), -1);
  EXPECT_EQ(reps[2], 1.0);
  EXPECT_EQ(res.rep_us, reps);
  EXPECT_EQ(res.warmup_done, 2);
  EXPECT_EQ(res.sm_clock_mhz, 0);
  // The kernel's own code comes back beside its error.
  int32_t rc = -5;
  EXPECT_EQ(CodeOf(htam_backend_run(m, nullptr, 0, nullptr, 0, &rc)), HTAM_ERR_KERNEL_FAILED);
  EXPECT_EQ(rc, 7);
  EXPECT_EQ(CodeOf(htam_backend_run(m, nullptr, 1, nullptr, 0, &rc)), HTAM_ERR_INVALID_ARGUMENT);
  htam_backend_module_release(m);
  htam_backend_artifact_release(a);
}

TEST(PluginEntries, TheCompileLanguageMustBeTheBackendsAndArgumentsPresent) {
  Toy t;
  htam_artifact* a = nullptr;
  htam_compile_request c{};
  c.struct_size = sizeof c;
  c.source = "k";
  c.source_len = 1;
  c.language = "cuda";
  std::string msg;
  EXPECT_EQ(CodeOf(htam_backend_compile(t.b, &c, &a), &msg), HTAM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(msg, "compile: toy backend compiles language 'toy', not 'cuda'");
  c.language = "toy";
  c.source = nullptr;
  EXPECT_EQ(CodeOf(htam_backend_compile(t.b, &c, &a)), HTAM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(CodeOf(htam_backend_compile(nullptr, &c, &a)), HTAM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(a, nullptr);
  EXPECT_EQ(htam_backend_device_stream(nullptr), nullptr);
  EXPECT_EQ(htam_backend_buffer_address(nullptr), nullptr);
}

TEST(PluginEntries, AnImportClosesTheHandlesDescriptorWhetherItSucceedsOrNot) {
  Toy t;
  for (uint64_t bytes : {uint64_t(0), uint64_t(16)}) {
    int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    htam_buffer_handle h{};
    h.struct_size = sizeof h;
    h.bytes = bytes;
    h.fd = fd;
    htam_buffer* b = nullptr;
    int code = CodeOf(htam_backend_buffer_import(t.d, &h, &b));
    EXPECT_EQ(code, bytes ? -1 : int(HTAM_ERR_INVALID_ARGUMENT));
    EXPECT_EQ(fcntl(fd, F_GETFD), -1) << "descriptor left open (bytes " << bytes << ")";
    if (b) htam_backend_buffer_free(b);
  }
  int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  htam_buffer_handle h{};
  h.struct_size = sizeof h;
  h.fd = fd;
  EXPECT_EQ(CodeOf(htam_backend_buffer_import(nullptr, &h, nullptr)), HTAM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(fcntl(fd, F_GETFD), -1);
}

}  // namespace
