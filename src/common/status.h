// Status and error codes shared by every SPACE component.
//
// Errors are values: a Status carries one canonical code (each maps to one HTTP status
// and one API error word) and a message saying what failed and why. Status is cheap to
// copy and thread-compatible.
#pragma once

#include <string>
#include <string_view>
#include <utility>

namespace space {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,     // 400 invalid_argument
  kUnauthenticated,     // 401 unauthenticated
  kPermissionDenied,    // 403 permission_denied
  kNotFound,            // 404 not_found
  kConflict,            // 409 conflict (wrong state, already exists)
  kPayloadTooLarge,     // 413 payload_too_large
  kResourceExhausted,   // 429 resource_exhausted
  kUnavailable,         // 503 unavailable
  kInternal,            // 500 internal
  kDeadlineExceeded,    // 504 (internal waits that ran out of time)
};

// The API's error word for a code ("invalid_argument", ...).
std::string_view StatusCodeWord(StatusCode code);
// The HTTP status an error with this code is answered with.
int StatusCodeHttp(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "code: message", for logs.
  std::string ToString() const;

  // Returns a copy whose message is prefixed with `context: `.
  Status Annotate(std::string_view context) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
inline Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status Conflict(std::string m) { return {StatusCode::kConflict, std::move(m)}; }
inline Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }
inline Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
inline Status PermissionDenied(std::string m) { return {StatusCode::kPermissionDenied, std::move(m)}; }
inline Status Unauthenticated(std::string m) { return {StatusCode::kUnauthenticated, std::move(m)}; }
inline Status PayloadTooLarge(std::string m) { return {StatusCode::kPayloadTooLarge, std::move(m)}; }
inline Status ResourceExhausted(std::string m) { return {StatusCode::kResourceExhausted, std::move(m)}; }
inline Status DeadlineExceeded(std::string m) { return {StatusCode::kDeadlineExceeded, std::move(m)}; }

// A failed syscall: "<call> <arg>: <ERRNO> (<strerror>)". Maps errno to a code
// (ENOENT -> not_found, EEXIST -> conflict, ...).
Status ErrnoStatus(std::string_view call, std::string_view arg, int err);

}  // namespace space

#define SPACE_CONCAT_INNER(a, b) a##b
#define SPACE_CONCAT(a, b) SPACE_CONCAT_INNER(a, b)

#define RETURN_IF_ERROR(expr)                  \
  do {                                         \
    ::space::Status _st = (expr);              \
    if (!_st.ok()) return _st;                 \
  } while (0)
