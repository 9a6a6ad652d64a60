#include "e2b/rpc_request.h"

#include "e2b/connect_envelope.h"

namespace space::e2b {
namespace {

Result<nlohmann::json> ParseMessage(std::string_view text) {
  if (text.empty()) return nlohmann::json::object();
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return InvalidArgument("request message is not a JSON object");
  return j;
}

bool HasContentType(const api::Request& req, std::string_view want) {
  std::string ct = req.Header("content-type");
  return ct.compare(0, want.size(), want) == 0 && (ct.size() == want.size() || ct[want.size()] == ';');
}

}  // namespace

Result<nlohmann::json> UnaryMessage(const api::Request& req) {
  if (!HasContentType(req, "application/json")) {
    return InvalidArgument("unary calls take Content-Type application/json (the JSON codec)");
  }
  if (req.body.size() > kMaxUnaryBytes) return ResourceExhausted("request message exceeds 16 MiB");
  return ParseMessage(req.body);
}

Result<nlohmann::json> StreamRequestMessage(const api::Request& req) {
  if (!HasContentType(req, "application/connect+json")) {
    return InvalidArgument("streaming calls take Content-Type application/connect+json");
  }
  ASSIGN_OR_RETURN(std::string msg, DecodeSingleRequestMessage(req.body));
  return ParseMessage(msg);
}

Result<int64_t> ConnectTimeoutMs(const api::Request& req) {
  std::string v = req.Header("connect-timeout-ms");
  if (v.empty()) return int64_t{0};
  // The protocol allows at most 10 digits.
  if (v.size() > 10 || v.find_first_not_of("0123456789") != std::string::npos) {
    return InvalidArgument("Connect-Timeout-Ms must be a positive integer");
  }
  return std::min<int64_t>(std::stoll(v), 86400000);
}

}  // namespace space::e2b
