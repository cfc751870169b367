// Command lines of htam-bench's C++ subcommands (args.h): counts and lists, repeated options,
// --help, and what a user sees from the built htam-bench when an option is unknown or its value
// bad.
#include "tools/bench/args.h"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <sstream>

namespace htam::bench {
namespace {

struct Parsed {
  int exit = 0;
  std::string out, err;
  po::variables_map vm;
};

// One description with each kind of option the subcommands use.
Parsed Parse(const std::vector<std::string>& args) {
  po::options_description d;
  d.add_options()("decisions", po::value<Count>()->default_value(Count{2000}, "2000"), "a count")(
      "sizes", po::value<CountList>()->default_value(CountList{{10000}}, "10k"), "a list")(
      "worker-args", po::value<std::string>(), "text")("keep", po::bool_switch(), "a switch")(
      "option", po::value<std::vector<std::string>>()->composing(), "repeatable");
  po::options_description hidden;
  hidden.add_options()("phase", po::value<std::string>(), "internal");
  Parsed p;
  std::ostringstream out, err;
  p.exit = ParseArgs("htam-bench test", "usage: htam-bench test [options]", args, d, hidden, &p.vm,
                     out, err);
  p.out = out.str();
  p.err = err.str();
  return p;
}

TEST(BenchArgs, CountsTakeKAndMAndListsAreCommaSeparated) {
  Parsed p = Parse({"--decisions", "10k", "--sizes=10k,,100K,1m,7"});
  ASSERT_EQ(p.exit, -1) << p.err;
  EXPECT_EQ(p.vm["decisions"].as<Count>().n, 10000);
  EXPECT_EQ(p.vm["sizes"].as<CountList>().v, (std::vector<int64_t>{10000, 100000, 1000000, 7}));
  p = Parse({});
  ASSERT_EQ(p.exit, -1);
  EXPECT_EQ(p.vm["decisions"].as<Count>().n, 2000);
  EXPECT_FALSE(p.vm["keep"].as<bool>());
}

TEST(BenchArgs, BadValuesAreRefusedNamingTheOption) {
  for (const std::vector<std::string>& args : {std::vector<std::string>{"--decisions", "lots"},
                                               {"--decisions", "-5"},
                                               {"--decisions", "1,2"},
                                               {"--decisions", "10x"},
                                               {"--sizes", "10k,x"},
                                               {"--decisions"}}) {
    Parsed p = Parse(args);
    EXPECT_EQ(p.exit, 2) << args[0];
    EXPECT_EQ(p.err.rfind("htam-bench test: ", 0), 0u) << p.err;
    EXPECT_NE(p.err.find("'--" + args[0].substr(2) + "'"), std::string::npos) << p.err;
    EXPECT_EQ(p.err.find('\n'), p.err.size() - 1) << "one line: " << p.err;
  }
}

TEST(BenchArgs, UnknownOptionsAndStrayWordsAreRefused) {
  Parsed p = Parse({"--no-such-flag", "1"});
  EXPECT_EQ(p.exit, 2);
  EXPECT_NE(p.err.find("no-such-flag"), std::string::npos) << p.err;
  p = Parse({"--dec", "5"});  // names are not abbreviated
  EXPECT_EQ(p.exit, 2);
  EXPECT_NE(p.err.find("'--dec'"), std::string::npos) << p.err;
  p = Parse({"--keep", "yes"});
  EXPECT_EQ(p.exit, 2);
  EXPECT_NE(p.err.find("'yes'"), std::string::npos) << p.err;
}

TEST(BenchArgs, TheLastOfARepeatedOptionWinsAndComposingOnesCollect) {
  Parsed p = Parse({"--decisions", "5", "--option", "a=1", "--keep", "--decisions", "7",
                    "--option=b=2", "--keep"});
  ASSERT_EQ(p.exit, -1) << p.err;
  EXPECT_EQ(p.vm["decisions"].as<Count>().n, 7);
  EXPECT_EQ(p.vm["option"].as<std::vector<std::string>>(),
            (std::vector<std::string>{"a=1", "b=2"}));
  EXPECT_TRUE(p.vm["keep"].as<bool>());
}

TEST(BenchArgs, AValueMayStartWithDashes) {
  Parsed p = Parse({"--worker-args=--eval.repetitions 20", "--phase", "measure"});
  ASSERT_EQ(p.exit, -1) << p.err;
  EXPECT_EQ(p.vm["worker-args"].as<std::string>(), "--eval.repetitions 20");
  EXPECT_EQ(p.vm["phase"].as<std::string>(), "measure");
}

TEST(BenchArgs, HelpListsTheShownOptionsOnly) {
  Parsed p = Parse({"--decisions", "5", "--help"});
  EXPECT_EQ(p.exit, 0);
  EXPECT_EQ(p.out.rfind("usage: htam-bench test", 0), 0u) << p.out;
  EXPECT_NE(p.out.find("--decisions arg (=2000)"), std::string::npos) << p.out;
  EXPECT_NE(p.out.find("--help"), std::string::npos);
  EXPECT_EQ(p.out.find("--phase"), std::string::npos) << p.out;
}

// ---------------------------------------------------------------- the built htam-bench

struct Outcome {
  int status = -1;
  std::string output;  // stdout and stderr
};

Outcome HtamBench(const std::string& args) {
  Outcome r;
  FILE* p = popen((std::string(HTAM_BENCH) + " " + args + " 2>&1").c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

TEST(HtamBench, EverySubcommandParsedHereListsItsOptions) {
  const std::pair<const char*, const char*> cases[] = {{"memory", "--decisions N (=2000)"},
                                                       {"daemon", "--clients LIST (=1,8,32)"},
                                                       {"eval", "--compile-threads N (=8)"},
                                                       {"workers", "--gpu-per-worker"}};
  for (const auto& [sub, option] : cases) {
    Outcome r = HtamBench(std::string(sub) + " --help");
    EXPECT_EQ(r.status, 0) << sub;
    EXPECT_NE(r.output.find(option), std::string::npos) << sub << ":\n" << r.output;
  }
}

// The subcommands written in Python start from the packages found above the binary (the build
// tree's python/, where the SDK is assembled and the agent linked), run from another folder.
TEST(HtamBench, PythonSubcommandsFindTheirPackagesAboveTheBinary) {
  for (const char* sub : {"world bench", "quality"}) {
    Outcome r = HtamBench(std::string(sub) + " --help");
    EXPECT_EQ(r.status, 0) << sub << ":\n" << r.output;
    EXPECT_NE(r.output.find("usage: htam-bench " + std::string(sub)), std::string::npos)
        << sub << ":\n" << r.output;
  }
}

TEST(HtamBench, AnUnknownOptionExits2NamingIt) {
  for (const char* sub : {"memory", "daemon", "eval", "workers"}) {
    Outcome r = HtamBench(std::string(sub) + " --no-such-flag");
    EXPECT_EQ(r.status, 2) << sub;
    EXPECT_NE(r.output.find("no-such-flag"), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find('\n'), r.output.size() - 1) << "one line: " << r.output;
  }
}

TEST(HtamBench, ABadIntegerIsRefused) {
  Outcome r = HtamBench("memory --decisions lots");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.output.find("'--decisions'"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("'lots'"), std::string::npos) << r.output;
  r = HtamBench("daemon --clients 1,eight");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.output.find("'--clients'"), std::string::npos) << r.output;
}

// htamd options go through the daemon's own table, and a bad one stops the run before a store
// is filled or a daemon started.
TEST(HtamBench, ADaemonOptionIsCheckedBeforeAnythingRuns) {
  Outcome r = HtamBench("daemon --option memory.no_such_option=1");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.output.find("memory.no_such_option"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find('\n'), r.output.size() - 1) << "one line: " << r.output;
  r = HtamBench("daemon --option memory.top_k_strategies");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.output.find("KEY=VALUE"), std::string::npos) << r.output;
  r = HtamBench("daemon --option memory.top_k_strategies=many");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.output.find("memory.top_k_strategies"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("filling the store"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace htam::bench
