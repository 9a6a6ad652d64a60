// Minimal HTTP types shared by the server and the route handlers: a parsed request and a
// responder that sends one whole response or a stream (server-sent events).
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace space::api {

struct Request {
  std::string method;                          // "GET", ...
  std::string target;                          // the request-target as sent (path?query, raw)
  std::string path;                            // decoded path, no query
  std::multimap<std::string, std::string> query;  // decoded
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
  std::string team;                            // set once authenticated
  std::vector<std::string> scopes;             // the key's (http/scopes.h), set with team
  std::string key_id;                          // "key_..." for a key made through /v1/keys, else ""
  int64_t received_mono_ns = 0;

  // The first value of query parameter `name`, or "".
  std::string Query(const std::string& name) const;
  bool HasQuery(const std::string& name) const { return query.count(name) > 0; }
  std::string Header(const std::string& lower_name) const;
};

// Sends the answer to one request. Exactly one of Send / (StartStream, Write*) per request.
class Responder {
 public:
  virtual ~Responder() = default;
  // Adds a header to the response sent next (Send or StartStream), e.g. a paging token.
  void AddHeader(std::string name, std::string value) { extra_headers_.emplace_back(std::move(name), std::move(value)); }
  virtual void Send(int status, std::string_view content_type, std::string body) = 0;
  // Starts a streamed response (no Content-Length; the connection closes at the end).
  virtual Status StartStream(int status, std::string_view content_type) = 0;
  // Writes stream bytes; fails once the client went away.
  virtual Status Write(std::string_view data) = 0;

  // Hands the connection itself to the handler, for a protocol that is no longer HTTP from
  // here (a preview port's relay): the descriptor (still owned by the server, which closes it
  // once the handler returns) and the bytes the server read past this request. Counts as the
  // response: nothing else may be sent, and the connection is not kept alive.
  struct RawConnection {
    int fd = -1;
    std::string leftover;
  };
  virtual Result<RawConnection> TakeConnection() { return Internal("this connection cannot be taken over"); }

  // Invalid UTF-8 from a sandbox is replaced (U+FFFD), never a reason to fail the response.
  void SendJson(int status, const nlohmann::json& body) {
    Send(status, "application/json", body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  }
  void SendError(const Status& st) {
    SendJson(StatusCodeHttp(st.code()), {{"code", std::string(StatusCodeWord(st.code()))}, {"message", st.message()}});
  }

 protected:
  std::vector<std::pair<std::string, std::string>> extra_headers_;
};

// Fills req->path and req->query from a request target ("/p?a=1&b"): decoded, at most 64
// query parameters. Fails (invalid_argument) on malformed escapes and NUL bytes.
Status ParseTarget(std::string_view target, Request* req);

// Decodes %XX and '+' (in queries). Fails on malformed escapes and NUL bytes.
Result<std::string> UrlDecode(std::string_view s, bool plus_is_space);

// The non-empty segments of a decoded path ("/v1//sandboxes/x" -> {"v1", "sandboxes", "x"}).
std::vector<std::string> SplitPath(const std::string& path);

}  // namespace space::api
