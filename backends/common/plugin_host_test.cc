// Loader tests: real dlopen of small plugins built wrong on purpose, and in-memory fakes.
#include "backends/common/plugin_host.h"

#include <gtest/gtest.h>

#include <map>

namespace htam {
namespace {

std::string Plugin(const char* kind) {
  return std::string(HTAM_TESTPLUGIN_DIR) + "/libhtam_testplugin_" + kind + ".so";
}

TEST(PluginHost, GoodPluginLoadsInitializesAndDescribes) {
  auto lib = PluginLibrary::Open(Plugin("good"));
  ASSERT_TRUE(lib.ok()) << lib.status().ToString();
  EXPECT_EQ((*lib)->api().profile, nullptr);  // optional entry point absent: skipped
  HostOptions host;
  host.work_dir = "/tmp";
  auto inst = BackendInstance::Create((*lib)->api(), host);
  ASSERT_TRUE(inst.ok()) << inst.status().ToString();
  EXPECT_STREQ((*inst)->description().name, "test");
  EXPECT_EQ((*inst)->description().can_run, 0);
  EXPECT_NE(std::string((*inst)->description().notes).find("cannot run here"), std::string::npos);
}

TEST(PluginHost, MissingRequiredSymbolIsRefusedByName) {
  auto lib = PluginLibrary::Open(Plugin("missing_symbol"));
  ASSERT_FALSE(lib.ok());
  EXPECT_NE(lib.status().message().find("missing required symbol htam_backend_time"),
            std::string::npos)
      << lib.status().message();
}

TEST(PluginHost, WrongMajorIsRefused) {
  auto lib = PluginLibrary::Open(Plugin("wrong_major"));
  ASSERT_FALSE(lib.ok());
  EXPECT_NE(lib.status().message().find("major version 2.0 is incompatible"), std::string::npos)
      << lib.status().message();
}

TEST(PluginHost, PluginNewerThanHostMinorIsRefused) {
  auto lib = PluginLibrary::Open(Plugin("newer_minor"));
  ASSERT_FALSE(lib.ok());
  const std::string host = "1." + std::to_string(HTAM_BACKEND_API_VERSION_MINOR);
  const std::string plugin = "1." + std::to_string(HTAM_BACKEND_API_VERSION_MINOR + 1);
  EXPECT_NE(lib.status().message().find("minor version " + plugin + " is newer than the host's " +
                                        host),
            std::string::npos)
      << lib.status().message();
}

TEST(PluginHost, DlopenErrorIsCopiedIntoTheMessage) {
  auto lib = PluginLibrary::Open("/nonexistent/libhtam_backend_x.so");
  ASSERT_FALSE(lib.ok());
  EXPECT_NE(lib.status().message().find("/nonexistent/libhtam_backend_x.so"), std::string::npos);
  EXPECT_NE(lib.status().message().find("No such file"), std::string::npos)
      << lib.status().message();
}

// In-memory fakes: the loader takes any symbol lookup.
void FakeVersion10(uint32_t* a, uint32_t* b) {
  *a = 1;
  *b = 0;
}
void FakeVersion12(uint32_t* a, uint32_t* b) {
  *a = 1;
  *b = 2;
}
void Dummy() {}

std::map<std::string, void*> FakeSymbols(void (*version)(uint32_t*, uint32_t*)) {
  std::map<std::string, void*> m;
  for (const char* n : {HTAM_BACKEND_REQUIRED_SYMBOLS}) m[n] = reinterpret_cast<void*>(&Dummy);
  m["htam_backend_api_version"] = reinterpret_cast<void*>(version);
  return m;
}

TEST(PluginHost, FakeOlderPluginMinorIsAcceptedByNewerHost) {
  auto syms = FakeSymbols(&FakeVersion10);
  auto api =
      ResolvePlugin([&](const char* n) { return syms.count(n) ? syms[n] : nullptr; }, "fake", 1, 3);
  ASSERT_TRUE(api.ok()) << api.status().ToString();
  EXPECT_EQ(api->minor, 0u);
  EXPECT_EQ(api->profile, nullptr);
}

TEST(PluginHost, FakeNewerPluginMinorIsRefusedByOlderHost) {
  auto syms = FakeSymbols(&FakeVersion12);
  auto api =
      ResolvePlugin([&](const char* n) { return syms.count(n) ? syms[n] : nullptr; }, "fake", 1, 1);
  ASSERT_FALSE(api.ok());
  EXPECT_NE(api.status().message().find("1.2 is newer than the host's 1.1"), std::string::npos);
}

// The profiler entry points (1.3) come as a pair: one alone is dropped, so a host never runs a
// profiler whose output nobody can read.
TEST(PluginHost, FakeProfileEntryPointsAreBothOrNeither) {
  auto syms = FakeSymbols(&FakeVersion12);
  syms["htam_backend_profile_command"] = reinterpret_cast<void*>(&Dummy);
  auto lookup = [&](const char* n) { return syms.count(n) ? syms[n] : nullptr; };
  auto alone = ResolvePlugin(lookup, "fake");
  ASSERT_TRUE(alone.ok()) << alone.status().ToString();
  EXPECT_EQ(alone->profile_command, nullptr);
  EXPECT_EQ(alone->profile_parse, nullptr);
  syms["htam_backend_profile_parse"] = reinterpret_cast<void*>(&Dummy);
  auto both = ResolvePlugin(lookup, "fake");
  ASSERT_TRUE(both.ok()) << both.status().ToString();
  EXPECT_NE(both->profile_command, nullptr);
  EXPECT_NE(both->profile_parse, nullptr);
}

TEST(PluginHost, FakeMissingEachRequiredSymbolIsNamed) {
  for (const char* missing : {HTAM_BACKEND_REQUIRED_SYMBOLS}) {
    if (std::string(missing) == "htam_backend_api_version") continue;
    auto syms = FakeSymbols(&FakeVersion10);
    syms.erase(missing);
    auto api =
        ResolvePlugin([&](const char* n) { return syms.count(n) ? syms[n] : nullptr; }, "fake");
    ASSERT_FALSE(api.ok()) << missing;
    EXPECT_NE(api.status().message().find(std::string("missing required symbol ") + missing),
              std::string::npos);
  }
}

TEST(PluginHost, ErrorsAreConsumedIntoStatusWithClass) {
  struct Owned {
    htam_backend_error e;
    static void Release(htam_backend_error* s) { delete reinterpret_cast<Owned*>(s); }
  };
  auto* o = new Owned{{HTAM_ERR_OUT_OF_MEMORY, "no memory", &Owned::Release}};
  int32_t code = 0;
  Status st = ConsumeError(&o->e, "alloc", &code);
  EXPECT_EQ(code, HTAM_ERR_OUT_OF_MEMORY);
  EXPECT_EQ(st.code(), Status::Code::kResourceExhausted);
  EXPECT_EQ(st.message(), "alloc: no memory");
  EXPECT_TRUE(ConsumeError(nullptr, "x").ok());
}

}  // namespace
}  // namespace htam
