#include "common/status.h"

#include <cerrno>
#include <cstring>

namespace space {

std::string_view StatusCodeWord(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "ok";
    case StatusCode::kInvalidArgument: return "invalid_argument";
    case StatusCode::kUnauthenticated: return "unauthenticated";
    case StatusCode::kPermissionDenied: return "permission_denied";
    case StatusCode::kNotFound: return "not_found";
    case StatusCode::kConflict: return "conflict";
    case StatusCode::kPayloadTooLarge: return "payload_too_large";
    case StatusCode::kResourceExhausted: return "resource_exhausted";
    case StatusCode::kUnavailable: return "unavailable";
    case StatusCode::kInternal: return "internal";
    case StatusCode::kDeadlineExceeded: return "unavailable";
  }
  return "internal";
}

int StatusCodeHttp(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return 200;
    case StatusCode::kInvalidArgument: return 400;
    case StatusCode::kUnauthenticated: return 401;
    case StatusCode::kPermissionDenied: return 403;
    case StatusCode::kNotFound: return 404;
    case StatusCode::kConflict: return 409;
    case StatusCode::kPayloadTooLarge: return 413;
    case StatusCode::kResourceExhausted: return 429;
    case StatusCode::kUnavailable: return 503;
    case StatusCode::kInternal: return 500;
    case StatusCode::kDeadlineExceeded: return 503;
  }
  return 500;
}

std::string Status::ToString() const {
  if (ok()) return "ok";
  return std::string(StatusCodeWord(code_)) + ": " + message_;
}

Status Status::Annotate(std::string_view context) const {
  if (ok()) return *this;
  return Status(code_, std::string(context) + ": " + message_);
}

Status ErrnoStatus(std::string_view call, std::string_view arg, int err) {
  StatusCode code = StatusCode::kInternal;
  switch (err) {
    case ENOENT: case ESRCH: code = StatusCode::kNotFound; break;
    case EEXIST: case ENOTEMPTY: case EBUSY: code = StatusCode::kConflict; break;
    case EINVAL: case ENAMETOOLONG: case ELOOP: case EISDIR: case ENOTDIR: case EXDEV:
      code = StatusCode::kInvalidArgument; break;
    case EACCES: case EPERM: code = StatusCode::kPermissionDenied; break;
    case ENOSPC: case EDQUOT: case EMFILE: case ENFILE: case ENOMEM: case EAGAIN:
      code = StatusCode::kResourceExhausted; break;
    default: break;
  }
  std::string msg(call);
  if (!arg.empty()) {
    msg += ' ';
    msg += arg;
  }
  msg += ": ";
  const char* name = strerrorname_np(err);
  msg += name ? name : "errno " + std::to_string(err);
  msg += " (";
  msg += strerror(err);
  msg += ")";
  return Status(code, std::move(msg));
}

}  // namespace space
