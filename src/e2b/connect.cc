#include "e2b/connect.h"

#include "e2b/connect_envelope.h"

namespace space::e2b {
namespace {

std::string Dump(const nlohmann::json& j) {
  // Bytes from a sandbox (file names) may be invalid UTF-8: replaced, never a failure.
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace

std::string_view RpcCode(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return "ok";
    case StatusCode::kInvalidArgument:
      return "invalid_argument";
    case StatusCode::kUnauthenticated:
      return "unauthenticated";
    case StatusCode::kPermissionDenied:
      return "permission_denied";
    case StatusCode::kNotFound:
      return "not_found";
    case StatusCode::kConflict:
      return "failed_precondition";
    case StatusCode::kPayloadTooLarge:
    case StatusCode::kResourceExhausted:
      return "resource_exhausted";
    case StatusCode::kUnavailable:
      return "unavailable";
    case StatusCode::kDeadlineExceeded:
      return "deadline_exceeded";
    case StatusCode::kInternal:
      return "internal";
  }
  return "unknown";
}

int RpcHttpStatus(std::string_view code) {
  if (code == "invalid_argument" || code == "failed_precondition" || code == "out_of_range") return 400;
  if (code == "unauthenticated") return 401;
  if (code == "permission_denied") return 403;
  if (code == "not_found") return 404;
  if (code == "already_exists" || code == "aborted") return 409;
  if (code == "resource_exhausted") return 429;
  if (code == "canceled") return 499;
  if (code == "unimplemented") return 501;
  if (code == "unavailable") return 503;
  if (code == "deadline_exceeded") return 504;
  return 500;
}

void SendUnary(api::Responder& res, const nlohmann::json& msg) {
  res.Send(200, "application/json", msg.is_null() ? "{}" : Dump(msg));
}

void SendRpcError(api::Responder& res, std::string_view code, const std::string& message) {
  res.Send(RpcHttpStatus(code), "application/json",
           Dump({{"code", std::string(code)}, {"message", message}}));
}

void SendRpcError(api::Responder& res, const Status& st) { SendRpcError(res, RpcCode(st.code()), st.message()); }

Status ConnectStream::Start() {
  if (started_) return Status::Ok();
  started_ = true;
  return res_.StartStream(200, "application/connect+json");
}

Status ConnectStream::Send(const nlohmann::json& msg) {
  RETURN_IF_ERROR(Start());
  return res_.Write(EncodeEnvelope(0, Dump(msg)));
}

void ConnectStream::End(const Status& st) {
  if (st.ok()) {
    if (ended_) return;
    if (!Start().ok()) return;
    ended_ = true;
    (void)res_.Write(EncodeEnvelope(kEnvelopeEndStream, "{}"));
    return;
  }
  EndWithCode(RpcCode(st.code()), st.message());
}

void ConnectStream::EndWithCode(std::string_view code, const std::string& message) {
  if (ended_) return;
  if (!Start().ok()) return;
  ended_ = true;
  nlohmann::json end = {{"error", {{"code", std::string(code)}, {"message", message}}}};
  (void)res_.Write(EncodeEnvelope(kEnvelopeEndStream, Dump(end)));
}

}  // namespace space::e2b
