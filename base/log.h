// Leveled logging to stderr (or a file): "2026-11-22T08:35:56.123Z INFO  [server] message", or
// one JSON object a line (general.log_format = json) that also carries the ids of the request,
// session and job the line belongs to (set by a LogScope on the thread that logs).
// Thread-safety: safe for concurrent use; each line is written whole. LogScope is per thread.
#pragma once

#include <cstdint>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace htam {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3, kOff = 4 };
enum class LogFormat { kText, kJson };

// Parses "debug", "info", "warn", "error", "off"; false on anything else.
bool ParseLogLevel(std::string_view text, LogLevel* level);
void SetLogLevel(LogLevel level);
LogLevel GetLogLevel();
// Parses "text" or "json"; false on anything else.
bool ParseLogFormat(std::string_view text, LogFormat* format);
void SetLogFormat(LogFormat format);
// Appends to this file instead of stderr; empty path returns to stderr. False if it cannot open.
bool SetLogFile(const std::string& path);
void LogLine(LogLevel level, std::string_view component, std::string_view message);

// An id that the log lines of this thread carry while the scope lives (JSON: "request_id": 7).
// Scopes nest; a zero value is not logged. `key` must outlive the scope (a literal).
struct LogField {
  const char* key;
  uint64_t value;
};
class LogScope {
 public:
  LogScope(const char* key, uint64_t value);
  // Re-establishes fields captured on another thread (work handed to a reader thread).
  explicit LogScope(const std::vector<LogField>& fields);
  ~LogScope();
  LogScope(const LogScope&) = delete;
  LogScope& operator=(const LogScope&) = delete;
  // The fields in force on this thread (to hand to LogScope on another thread).
  static std::vector<LogField> Current();

 private:
  size_t pushed_;
};

namespace internal {
class LogMessage {
 public:
  LogMessage(LogLevel level, std::string_view component) : level_(level), component_(component) {}
  ~LogMessage() { LogLine(level_, component_, stream_.str()); }
  std::ostringstream& stream() { return stream_; }

 private:
  LogLevel level_;
  std::string_view component_;
  std::ostringstream stream_;
};
}  // namespace internal

}  // namespace htam

// HTAM_LOG(kInfo, "server") << "bound " << endpoint;  the stream is not evaluated below the level.
#define HTAM_LOG(level, component)                       \
  if (::htam::LogLevel::level < ::htam::GetLogLevel()) { \
  } else                                                 \
    ::htam::internal::LogMessage(::htam::LogLevel::level, component).stream()
