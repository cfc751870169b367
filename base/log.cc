// Leveled logging; one mutex keeps lines whole.
#include "base/log.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <mutex>
#include <string>
#include <vector>

namespace htam {
namespace {
std::atomic<LogLevel> g_level{LogLevel::kInfo};
std::atomic<LogFormat> g_format{LogFormat::kText};
thread_local std::vector<LogField> t_fields;
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
const char* JsonLevelName(LogLevel l) {
  switch (l) {
    case LogLevel::kDebug: return "debug";
    case LogLevel::kInfo: return "info";
    case LogLevel::kWarn: return "warn";
    case LogLevel::kError: return "error";
    case LogLevel::kOff: return "off";
  }
  return "?";
}

// A JSON string literal: quotes, backslashes and control characters escaped; other bytes as
// they are (messages are UTF-8 or ASCII).
void AppendJsonString(std::string* out, std::string_view s) {
  *out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"': *out += "\\\""; break;
      case '\\': *out += "\\\\"; break;
      case '\n': *out += "\\n"; break;
      case '\r': *out += "\\r"; break;
      case '\t': *out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          *out += buf;
        } else {
          *out += static_cast<char>(c);
        }
    }
  }
  *out += '"';
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

bool ParseLogFormat(std::string_view t, LogFormat* format) {
  if (t == "text")
    *format = LogFormat::kText;
  else if (t == "json")
    *format = LogFormat::kJson;
  else
    return false;
  return true;
}

void SetLogFormat(LogFormat format) {
  g_format.store(format);
}

LogScope::LogScope(const char* key, uint64_t value) : pushed_(1) {
  t_fields.push_back({key, value});
}
LogScope::LogScope(const std::vector<LogField>& fields) : pushed_(fields.size()) {
  t_fields.insert(t_fields.end(), fields.begin(), fields.end());
}
LogScope::~LogScope() {
  t_fields.resize(t_fields.size() - pushed_);
}
std::vector<LogField> LogScope::Current() {
  return t_fields;
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
  std::string json;
  if (g_format.load() == LogFormat::kJson) {
    // One object a line: ts, level, component, msg, then the ids in force (innermost wins).
    char stamp[48];
    std::snprintf(stamp, sizeof stamp, "%s.%03dZ", ts, ms);
    json = "{\"ts\":\"";
    json += stamp;
    json += "\",\"level\":\"";
    json += JsonLevelName(level);
    json += "\",\"component\":";
    AppendJsonString(&json, component);
    json += ",\"msg\":";
    AppendJsonString(&json, message);
    std::vector<const char*> seen;
    for (auto it = t_fields.rbegin(); it != t_fields.rend(); ++it) {
      if (it->value == 0) continue;
      bool dup = false;
      for (const char* k : seen) dup = dup || std::string_view(k) == it->key;
      if (dup) continue;
      seen.push_back(it->key);
      json += ",\"";
      json += it->key;
      json += "\":" + std::to_string(it->value);
    }
    json += "}\n";
  }
  std::lock_guard<std::mutex> lock(g_mu);
  FILE* out = g_file ? g_file : stderr;
  if (!json.empty())
    std::fwrite(json.data(), 1, json.size(), out);
  else
    std::fprintf(out, "%s.%03dZ %s [%.*s] %.*s\n", ts, ms, LevelName(level),
                 static_cast<int>(component.size()), component.data(),
                 static_cast<int>(message.size()), message.data());
  std::fflush(out);
}

}  // namespace htam
