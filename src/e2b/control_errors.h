// Errors on E2B's REST surfaces (control API and envd's /files): HTTP status plus JSON
// {"code": <the HTTP status as a number>, "message": "..."}. The SDK branches on the body's
// numeric code (404 -> not found / false, 409 -> already paused), so the body must carry it.
#pragma once

#include "common/status.h"
#include "http/http.h"

namespace space::e2b {

inline void SendControlError(api::Responder& res, int http_status, const std::string& message) {
  res.SendJson(http_status, {{"code", http_status}, {"message", message}});
}

inline void SendControlError(api::Responder& res, const Status& st) {
  SendControlError(res, StatusCodeHttp(st.code()), st.message());
}

}  // namespace space::e2b
