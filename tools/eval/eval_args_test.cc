// htam-eval's command line: the tool's flags and the configuration table in one parser.
#include "tools/eval/eval_args.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace htam::evaltool {
namespace {

const std::string kTask = "tests/hacks/cpu/small_relu";  // tests run from the repository root

Status Parse(std::vector<const char*> argv, EvalArgs* a, Config* c) {
  argv.insert(argv.begin(), "htam-eval");
  std::ostringstream out;
  bool exit_now = false;
  return ParseEvalArgs(int(argv.size()), argv.data(), a, c, out, &exit_now);
}

TEST(EvalArgs, FilesKeepTheirOrderWhetherPositionalOrSource) {
  EvalArgs a;
  Config c;
  ASSERT_TRUE(Parse({"a.cpp", "--task", kTask.c_str(), "--source", "b.cpp", "c.cpp"}, &a, &c).ok());
  EXPECT_EQ(a.sources, (std::vector<std::string>{"a.cpp", "b.cpp", "c.cpp"}));
  EXPECT_EQ(a.tasks, std::vector<std::string>{kTask});
}

TEST(EvalArgs, TableOptionsFlagsAndOptionKeysReachTheConfiguration) {
  EvalArgs a;
  Config c;
  ASSERT_TRUE(Parse({"--task", kTask.c_str(), "--reference", "--eval.repetitions", "9",
                     "--option", "cuda_roofline=false", "--option", "seeds=5", "--sets", "2",
                     "--compile-threads", "3", "--cache", "/tmp/x"},
                    &a, &c)
                  .ok());
  EXPECT_EQ(c.GetInt("eval.repetitions"), 9);
  EXPECT_FALSE(c.GetBool("eval.cuda_roofline"));
  EXPECT_EQ(c.GetInt("eval.seeds"), 5);
  EXPECT_EQ(c.GetInt("eval.input_sets"), 2);
  EXPECT_EQ(c.GetInt("eval.compile_ahead_threads"), 3);
  EXPECT_EQ(c.GetInt("eval.cuda_compile_threads"), 3);
  EXPECT_EQ(c.GetString("eval.cache_dir"), "/tmp/x");
  // The dedicated flag wins over the table option it stands for.
  ASSERT_TRUE(Parse({"--task", kTask.c_str(), "--reference", "--eval.seeds", "4", "--seeds", "2"},
                    &a, &c)
                  .ok());
  EXPECT_EQ(c.GetInt("eval.seeds"), 2);
}

TEST(EvalArgs, OptionKeysMapOntoTheTable) {
  EXPECT_EQ(TableOptionFor("eval.seeds"), "eval.seeds");
  EXPECT_EQ(TableOptionFor("seeds"), "eval.seeds");
  EXPECT_EQ(TableOptionFor("cuda_timing_mode"), "eval.cuda_timing_mode");
  EXPECT_EQ(TableOptionFor("nvcc"), "eval.cuda_nvcc");
  EXPECT_EQ(TableOptionFor("hip_platform"), "eval.hip_platform");
  EXPECT_EQ(TableOptionFor("no_such_key"), "");
}

TEST(EvalArgs, BadCommandLinesNameWhatIsWrong) {
  struct Case {
    std::vector<const char*> argv;
    std::string words;
  } cases[] = {
      {{"--task", kTask.c_str(), "--seeds", "0", "a.cpp"}, "--seeds"},
      {{"--task", kTask.c_str(), "--reps", "3x", "a.cpp"}, "--reps"},
      {{"--task", kTask.c_str(), "--eval.seeds", "many", "a.cpp"}, "eval.seeds"},
      {{"--task", kTask.c_str(), "--option", "nope=1", "a.cpp"}, "nope"},
      {{"--task", kTask.c_str(), "--option", "seeds", "a.cpp"}, "seeds"},
      {{"--task", kTask.c_str(), "--frobnicate", "a.cpp"}, "frobnicate"},
      {{"a.cpp"}, "--task"},
      {{"--task", kTask.c_str()}, "--reference"},
      {{"--task", kTask.c_str(), "--task", kTask.c_str(), "a.cpp"}, "one --task"},
      {{"--task", kTask.c_str(), "--write", "a.cpp"}, "--lineage"},
      {{"--task", "/no/such/task", "a.cpp"}, "/no/such/task"},
      {{"--task", kTask.c_str(), "--plugin", "/tmp/libfoo.so", "a.cpp"}, "libhtam_backend_"},
      {{"--task", kTask.c_str(), "--single-call", "a.cpp"}, "--in-process"},
  };
  for (const auto& k : cases) {
    EvalArgs a;
    Config c;
    Status st = Parse(k.argv, &a, &c);
    ASSERT_FALSE(st.ok()) << k.words;
    EXPECT_EQ(st.code(), Status::Code::kInvalidArgument) << st.ToString();
    EXPECT_NE(st.message().find(k.words), std::string::npos) << st.message();
  }
}

TEST(EvalArgs, PluginNamesTheBackendAndItsFolder) {
  const std::string dir = ::testing::TempDir() + "/htam-eval-args-plugin";
  std::filesystem::create_directories(dir);
  const std::string plugin = dir + "/libhtam_backend_cpu.so";
  std::ofstream(plugin) << "not loaded here";
  EvalArgs a;
  Config c;
  ASSERT_TRUE(Parse({"--task", kTask.c_str(), "--plugin", plugin.c_str(), "a.cpp"}, &a, &c).ok());
  EXPECT_EQ(a.backend, "cpu");
  EXPECT_EQ(c.GetString("eval.backends"), "cpu");
  EXPECT_EQ(std::filesystem::path(c.GetString("eval.plugin_dir")),
            std::filesystem::path(dir).lexically_normal());
  Status st = Parse({"--task", kTask.c_str(), "--backend", "cuda", "--plugin", plugin.c_str(),
                     "a.cpp"},
                    &a, &c);
  EXPECT_FALSE(st.ok());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace htam::evaltool
