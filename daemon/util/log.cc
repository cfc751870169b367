// Leveled logging; one mutex keeps lines whole.
#include "daemon/util/log.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <mutex>

namespace htam {
namespace {
std::atomic<LogLevel> g_level{LogLevel::kInfo};
std::mutex g_mu;
FILE* g_file = nullptr;  // guarded by g_mu; null = stderr

const char* LevelName(LogLevel l) {
  switch (l) {
    case LogLevel::kDebug: return "DEBUG";
    case LogLevel::kInfo: return "INFO ";
    case LogLevel::kWarn: return "WARN ";
    case LogLevel::kError: return "ERROR";
    case LogLevel::kOff: return "OFF  ";
  }
  return "?";
}
}  // namespace

bool ParseLogLevel(std::string_view t, LogLevel* level) {
  if (t == "debug")
    *level = LogLevel::kDebug;
  else if (t == "info")
    *level = LogLevel::kInfo;
  else if (t == "warn" || t == "warning")
    *level = LogLevel::kWarn;
  else if (t == "error")
    *level = LogLevel::kError;
  else if (t == "off")
    *level = LogLevel::kOff;
  else
    return false;
  return true;
}

void SetLogLevel(LogLevel level) {
  g_level.store(level);
}
LogLevel GetLogLevel() {
  return g_level.load();
}

bool SetLogFile(const std::string& path) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_file) fclose(g_file);
  g_file = nullptr;
  if (path.empty()) return true;
  g_file = fopen(path.c_str(), "a");
  return g_file != nullptr;
}

void LogLine(LogLevel level, std::string_view component, std::string_view message) {
  if (level < g_level.load() || level == LogLevel::kOff) return;
  auto now = std::chrono::system_clock::now();
  std::time_t secs = std::chrono::system_clock::to_time_t(now);
  int ms = static_cast<int>(
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char ts[32];
  std::strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
  std::lock_guard<std::mutex> lock(g_mu);
  FILE* out = g_file ? g_file : stderr;
  std::fprintf(out, "%s.%03dZ %s [%.*s] %.*s\n", ts, ms, LevelName(level),
               static_cast<int>(component.size()), component.data(),
               static_cast<int>(message.size()), message.data());
  std::fflush(out);
}

}  // namespace htam
