// Connect RPC responses with the JSON codec (connectrpc.com/docs/protocol): unary answers,
// unary errors, and server streams of enveloped messages ending in an end-stream frame.
// The E2B SDK's transport accepts nothing else (see docs/e2b.md). Stateless helpers; a
// ConnectStream belongs to one request thread.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "http/http.h"

namespace space::e2b {

// Connect's error word for a SPACE status (not_found, invalid_argument, ...). kConflict is
// failed_precondition: SPACE uses it for "wrong state".
std::string_view RpcCode(StatusCode code);
// The HTTP status Connect pairs with an error word.
int RpcHttpStatus(std::string_view code);

// 200 application/json with `msg` ({} for empty messages: an empty body breaks the client).
void SendUnary(api::Responder& res, const nlohmann::json& msg);
// Non-200 application/json {"code": "<word>", "message": "..."}.
void SendRpcError(api::Responder& res, std::string_view code, const std::string& message);
void SendRpcError(api::Responder& res, const Status& st);

// A server-streaming response: HTTP 200 application/connect+json, then one envelope per
// message, then the end-stream envelope carrying {} or {"error": {...}}. Errors after the
// start always travel in the end-stream frame (a non-200 would lose their code).
class ConnectStream {
 public:
  explicit ConnectStream(api::Responder& res) : res_(res) {}
  // Sends the headers. Fails when the client is gone.
  Status Start();
  Status Send(const nlohmann::json& msg);
  // Ends the stream; `st` not ok sends it as the stream's error. Idempotent.
  void End(const Status& st = Status::Ok());
  void EndWithCode(std::string_view code, const std::string& message);

 private:
  api::Responder& res_;
  bool started_ = false;
  bool ended_ = false;
};

}  // namespace space::e2b
