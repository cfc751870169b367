// Status and Result<T>: errors are values. No exception crosses a module boundary; code that
// calls a throwing library catches at the adapter and returns a Status. Public: the C++ SDK's
// calls return them (htam/client.h), and every part of htam uses the same type (base/status.h).
// Thread-safety: immutable values, safe to share after construction.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace htam {

class Status {
 public:
  enum class Code {
    kOk = 0,
    kNotFound,
    kCorruption,
    kIOError,
    kInvalidArgument,
    kFailedPrecondition,  // e.g. a store of a newer schema, a locked data directory
    kResourceExhausted,   // full disk, full queue (busy)
    kUnavailable,         // no worker, peer gone
    kTimeout,
    kPermissionDenied,
    kInternal,
  };

  Status() = default;
  static Status OK() { return Status(); }
  static Status NotFound(std::string_view m) { return Status(Code::kNotFound, m); }
  static Status Corruption(std::string_view m) { return Status(Code::kCorruption, m); }
  static Status IOError(std::string_view m) { return Status(Code::kIOError, m); }
  static Status InvalidArgument(std::string_view m) { return Status(Code::kInvalidArgument, m); }
  static Status FailedPrecondition(std::string_view m) {
    return Status(Code::kFailedPrecondition, m);
  }
  static Status ResourceExhausted(std::string_view m) {
    return Status(Code::kResourceExhausted, m);
  }
  static Status Unavailable(std::string_view m) { return Status(Code::kUnavailable, m); }
  static Status Timeout(std::string_view m) { return Status(Code::kTimeout, m); }
  static Status PermissionDenied(std::string_view m) { return Status(Code::kPermissionDenied, m); }
  static Status Internal(std::string_view m) { return Status(Code::kInternal, m); }

  bool ok() const { return code_ == Code::kOk; }
  bool IsNotFound() const { return code_ == Code::kNotFound; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }

  // Prefixes the message with context: "opening store: <message>".
  Status WithContext(std::string_view context) const {
    if (ok()) return *this;
    return Status(code_, std::string(context) + ": " + message_);
  }

  // "NotFound: no such session 42"
  std::string ToString() const;
  static const char* CodeName(Code code);

  bool operator==(const Status& o) const { return code_ == o.code_ && message_ == o.message_; }

 private:
  Status(Code code, std::string_view message) : code_(code), message_(message) {}
  Code code_ = Code::kOk;
  std::string message_;
};

// Either a value or a non-OK Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}         // NOLINT(google-explicit-constructor)
  Result(Status status) : v_(std::move(status)) {}  // NOLINT(google-explicit-constructor)

  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace htam

// Returns early with the Status of an expression that is not OK.
#define HTAM_RETURN_IF_ERROR(expr)       \
  do {                                   \
    ::htam::Status _htam_st = (expr);    \
    if (!_htam_st.ok()) return _htam_st; \
  } while (0)

#define HTAM_CONCAT_INNER_(a, b) a##b
#define HTAM_CONCAT_(a, b) HTAM_CONCAT_INNER_(a, b)
// HTAM_ASSIGN_OR_RETURN(auto x, MakeX()); returns the Status when MakeX() failed.
#define HTAM_ASSIGN_OR_RETURN(lhs, expr) \
  HTAM_ASSIGN_OR_RETURN_IMPL_(HTAM_CONCAT_(_htam_res_, __LINE__), lhs, expr)
#define HTAM_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.ok()) return tmp.status();               \
  lhs = std::move(tmp).value()
