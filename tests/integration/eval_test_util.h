// Helpers for the evaluation integration tests: an Evaluator with the CPU backend, a private
// data dir and short timing/timeout settings, and a blocking evaluate-a-file call.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "daemon/eval/evaluator.h"
#include "daemon/eval/sandbox.h"

namespace htam::eval::testing {

inline std::string ReadSource(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(bool(in)) << "cannot read " << path;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class TempDir {
 public:
  TempDir() {
    char t[] = "/tmp/htam-evaltest-XXXXXX";
    path_ = mkdtemp(t);
    chmod(path_.c_str(), 0755);  // workers may run as an unprivileged user
  }
  ~TempDir() { RemoveTree(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Defaults for tests: quick, but every check of the gate active.
inline Config TestConfig(const std::string& data_dir,
                         const std::map<std::string, std::string>& overrides = {}) {
  Config c = Config::Defaults();
  std::map<std::string, std::string> v = {
      {"general.data_dir", data_dir}, {"general.log_level", "warn"},
      {"eval.backends", "cpu"},       {"eval.seeds", "3"},
      {"eval.repetitions", "10"},     {"eval.warmup_reps", "3"},
      {"eval.warmup_ms", "5"},        {"eval.case_timeout_s", "30"},
      {"eval.flush_max_mb", "8"},     {"eval.scratch_dir", data_dir + "/scratch"}};
  for (const auto& [k, val] : overrides) v[k] = val;
  for (const auto& [k, val] : v) EXPECT_TRUE(c.Set(k, val).ok()) << k;
  return c;
}

inline std::unique_ptr<Evaluator> StartEvaluator(const Config& c) {
  auto e = Evaluator::Start(EvalOptions::FromConfig(c));
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  if (!e.ok()) return nullptr;
  EXPECT_EQ((*e)->Backends(), std::vector<std::string>{"cpu"}) << (*e)->StatusText();
  return std::move(*e);
}

inline EvalJob Job(uint64_t id, const std::string& task_dir, const std::string& source) {
  EvalJob j;
  j.job_id = id;
  j.task_dir = task_dir;
  j.backend = "cpu";
  j.source = source;
  return j;
}

inline const char* Name(fb::OutcomeStatus s) {
  return fb::EnumNameOutcomeStatus(s);
}

}  // namespace htam::eval::testing
