// Leveled logging to stderr (or a file): "2026-11-22T08:35:56.123Z INFO  [server] message".
// Thread-safety: safe for concurrent use; each line is written whole.
#pragma once

#include <sstream>
#include <string>
#include <string_view>

namespace htam {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3, kOff = 4 };

// Parses "debug", "info", "warn", "error", "off"; false on anything else.
bool ParseLogLevel(std::string_view text, LogLevel* level);
void SetLogLevel(LogLevel level);
LogLevel GetLogLevel();
// Appends to this file instead of stderr; empty path returns to stderr. False if it cannot open.
bool SetLogFile(const std::string& path);
void LogLine(LogLevel level, std::string_view component, std::string_view message);

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
