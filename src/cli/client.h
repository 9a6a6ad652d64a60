// Client: the CLI's HTTP/1.1 client for the v1 API (Boost.Beast, synchronous). Reads
// SPACE_URL and SPACE_API_KEY. Thread-compatible.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace space::cli {

struct Response {
  int status = 0;
  std::string content_type;
  std::string body;
};

// One server-sent event.
struct SseEvent {
  std::string name;
  std::string data;
};

class Client {
 public:
  // From SPACE_URL (default http://127.0.0.1:7722) and SPACE_API_KEY (default: the key file
  // of the default data dir, when readable).
  static Result<Client> FromEnv();
  Client(std::string host, std::string port, std::string key)
      : host_(std::move(host)), port_(std::move(port)), key_(std::move(key)) {}

  Result<Response> Call(const std::string& method, const std::string& target, const std::string& body = "",
                        const std::string& content_type = "application/json",
                        const std::map<std::string, std::string>& headers = {});
  // Calls and reads a text/event-stream response, handing each event to `on_event`.
  Status Stream(const std::string& method, const std::string& target, const std::string& body,
                const std::function<void(const SseEvent&)>& on_event);

 private:
  std::string host_, port_, key_;
};

// The API error in a response, as a Status ("not_found: sandbox ... not found").
Status ResponseError(const Response& r);
// Calls and parses a JSON answer ({} for an empty one). On a transport error, an error answer
// or an unreadable body, prints "space: <why>" to stderr and returns nullopt.
std::optional<nlohmann::json> CallJson(Client& c, const std::string& method, const std::string& target,
                                       const std::string& body = "");
// Percent-encodes a query value.
std::string UrlEncode(const std::string& s);

}  // namespace space::cli
