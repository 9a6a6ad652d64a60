// libFuzzer target: the API's request parsing path up to the handlers, as the server runs it
// (http/http_server.cc): Beast's request parser with the server's header and body limits, the
// target split into a decoded path and query (ParseTarget), then the JSON body and path
// checks every handler starts with. Nothing may crash, hang or throw out.
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "common/ids.h"
#include "http/http.h"
#include "http/validate.h"

namespace http = boost::beast::http;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  // Requests arrive in pieces: feed the input in two parts split where its first byte says.
  size_t split = size > 0 ? data[0] % (size + 1) : 0;
  http::request_parser<http::string_body> parser;
  parser.header_limit(64 * 1024);
  parser.body_limit(1 << 20);
  parser.eager(true);
  boost::beast::error_code ec;
  std::string pending;
  for (std::string_view piece : {in.substr(0, split), in.substr(split)}) {
    pending.append(piece);
    while (!pending.empty() && !parser.is_done()) {
      size_t used = parser.put(boost::asio::buffer(pending.data(), pending.size()), ec);
      pending.erase(0, used);
      if (ec == http::error::need_more) {
        ec = {};
        break;
      }
      if (ec) return 0;
      if (used == 0) break;
    }
  }
  if (!parser.is_header_done()) return 0;
  auto& msg = parser.get();
  space::api::Request req;
  req.method = std::string(msg.method_string());
  for (const auto& f : msg) req.headers[std::string(f.name_string())] = std::string(f.value());
  if (!space::api::ParseTarget(msg.target(), &req).ok()) return 0;
  if (req.path.find('\0') != std::string::npos) std::abort();  // ParseTarget promises no NUL
  if (req.query.size() > 64) std::abort();
  (void)space::IsPublicId(req.path, "sbx");
  (void)space::api::CheckSandboxPath(req.Query("path"));
  if (parser.is_done()) {
    auto obj = space::api::ParseObject(msg.body());
    if (obj.ok()) {
      (void)space::api::GetString(*obj, "template", "base", 64);
      (void)space::api::GetInt(*obj, "timeout_s", 300, 1, 86400);
      (void)space::api::GetStringMap(*obj, "env", 256, 256, 65536, space::api::IsEnvName);
      (void)space::api::GetStringList(*obj, "cmd", 1024, 65536);
    }
  }
  return 0;
}
