// Helpers of the GPU tests: run htam-eval as a child process (each evaluation batch in its own
// process, through the evaluator htamd uses) and parse its JSON lines; skip cleanly where no GPU
// is present.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

namespace htam::gputest {

// A path compiled in (the build tree), unless the environment names another one: the GPU session
// runs binaries built elsewhere (tools/gpu/one_run.sh sets HTAM_EVAL, HTAM_CUDA_PLUGIN_PATH,
// HTAM_HIP_PLUGIN_PATH to the staged copies).
inline std::string PathFromEnv(const char* env, const char* built) {
  const char* e = getenv(env);
  return e && *e ? std::string(e) : std::string(built);
}

struct CliRun {
  int exit_code = -1;
  std::string output;                   // stdout + stderr
  std::vector<nlohmann::json> results;  // one per JSON line
  std::map<std::string, nlohmann::json> by_source;
};

inline CliRun RunCli(const std::string& args, int limit_s = 300) {
  CliRun r;
  std::string cmd = "timeout -s KILL " + std::to_string(limit_s) + " " +
                    PathFromEnv("HTAM_EVAL", HTAM_EVAL) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[8192];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  int st = pclose(p);
  r.exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  std::istringstream in(r.output);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] != '{') continue;
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded()) continue;
    r.results.push_back(j);
    std::string src = j.value("source", "");
    r.by_source[src.substr(src.find_last_of('/') + 1)] = j;
  }
  return r;
}

// Exit code 4 of htam-eval: the backend cannot run here (no driver / no GPU).
constexpr int kCliNoDevice = 4;

}  // namespace htam::gputest
