// Reading Connect requests: the message of a unary call (the body is the JSON) or of a
// server-streaming call (one enveloped JSON message), bounded and checked for shape.
// Stateless and thread-safe.
#pragma once

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "http/http.h"

namespace space::e2b {

// Unary requests larger than this are refused (the largest is SendInput with stdin data).
inline constexpr size_t kMaxUnaryBytes = 16u << 20;

// The request message as a JSON object ("" is {}).
Result<nlohmann::json> UnaryMessage(const api::Request& req);
Result<nlohmann::json> StreamRequestMessage(const api::Request& req);

// Connect-Timeout-Ms in milliseconds (0: absent). Bounded to a day.
Result<int64_t> ConnectTimeoutMs(const api::Request& req);

}  // namespace space::e2b
