#include "cli/client.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <cstdlib>
#include <iostream>

#include "common/syscall.h"

namespace space::cli {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

Result<Client> Client::FromEnv() {
  std::string url = std::getenv("SPACE_URL") ? std::getenv("SPACE_URL") : "http://127.0.0.1:7722";
  constexpr std::string_view kScheme = "http://";
  if (url.compare(0, kScheme.size(), kScheme) != 0) return InvalidArgument("SPACE_URL must start with http://");
  std::string rest = url.substr(kScheme.size());
  while (!rest.empty() && rest.back() == '/') rest.pop_back();
  size_t colon = rest.rfind(':');
  std::string host = colon == std::string::npos ? rest : rest.substr(0, colon);
  std::string port = colon == std::string::npos ? "80" : rest.substr(colon + 1);
  std::string key = std::getenv("SPACE_API_KEY") ? std::getenv("SPACE_API_KEY") : "";
  if (key.empty()) {
    auto k = ReadFileToString("/var/lib/space/api-key", 4096);
    if (k.ok()) key = *k;
  }
  while (!key.empty() && (key.back() == '\n' || key.back() == ' ')) key.pop_back();
  return Client(host, port, key);
}

namespace {
template <typename Fn>
Status WithConnection(const std::string& host, const std::string& port, Fn fn) {
  try {
    asio::io_context io;
    tcp::resolver resolver(io);
    beast::tcp_stream stream(io);
    stream.connect(resolver.resolve(host, port));
    Status st = fn(stream);
    beast::error_code ec;
    stream.socket().shutdown(tcp::socket::shutdown_both, ec);
    return st;
  } catch (const std::exception& e) {  // Beast reports network failures by throwing
    return Unavailable("cannot reach SPACE at " + host + ":" + port + ": " + e.what());
  }
}

http::request<http::string_body> MakeRequest(const std::string& method, const std::string& target,
                                             const std::string& host, const std::string& key, const std::string& body,
                                             const std::string& content_type) {
  http::request<http::string_body> req{http::string_to_verb(method), target, 11};
  req.set(http::field::host, host);
  req.set(http::field::user_agent, "space-cli");
  if (!key.empty()) req.set(http::field::authorization, "Bearer " + key);
  if (!body.empty()) req.set(http::field::content_type, content_type);
  req.body() = body;
  req.prepare_payload();
  return req;
}
}  // namespace

Result<Response> Client::Call(const std::string& method, const std::string& target, const std::string& body,
                              const std::string& content_type, const std::map<std::string, std::string>& headers) {
  Response out;
  Status st = WithConnection(host_, port_, [&](beast::tcp_stream& stream) {
    auto req = MakeRequest(method, target, host_, key_, body, content_type);
    for (const auto& [k, v] : headers) req.set(k, v);
    http::write(stream, req);
    beast::flat_buffer buffer;
    http::response_parser<http::string_body> parser;
    parser.body_limit(1ull << 30);
    http::read(stream, buffer, parser);
    out.status = static_cast<int>(parser.get().result_int());
    out.content_type = std::string(parser.get()[http::field::content_type]);
    out.body = std::move(parser.get().body());
    return Status::Ok();
  });
  if (!st.ok()) return st;
  return out;
}

Status Client::Stream(const std::string& method, const std::string& target, const std::string& body,
                      const std::function<void(const SseEvent&)>& on_event) {
  return WithConnection(host_, port_, [&](beast::tcp_stream& stream) -> Status {
    auto req = MakeRequest(method, target, host_, key_, body, "application/json");
    req.set(http::field::accept, "text/event-stream");
    http::write(stream, req);
    beast::flat_buffer buffer;
    http::response_parser<http::string_body> parser;
    parser.body_limit(16u << 20);
    http::read_header(stream, buffer, parser);
    int status = static_cast<int>(parser.get().result_int());
    if (status >= 300) {
      // Errors are ordinary JSON bodies with a Content-Length.
      http::read(stream, buffer, parser);
      return ResponseError(Response{status, "", parser.get().body()});
    }
    // The event stream runs until the server closes the connection: after the header, the
    // bytes are read raw (what the header read already buffered comes first).
    std::string pending(static_cast<const char*>(buffer.data().data()), buffer.size());
    SseEvent ev;
    auto drain_lines = [&] {
      size_t nl;
      while ((nl = pending.find('\n')) != std::string::npos) {
        std::string line = pending.substr(0, nl);
        pending.erase(0, nl + 1);
        if (line.empty()) {
          if (!ev.name.empty() || !ev.data.empty()) on_event(ev);
          ev = SseEvent{};
        } else if (line.rfind("event: ", 0) == 0) {
          ev.name = line.substr(7);
        } else if (line.rfind("data: ", 0) == 0) {
          ev.data += line.substr(6);
        }
      }
    };
    drain_lines();
    char chunk[16384];
    for (;;) {
      beast::error_code ec;
      size_t n = stream.socket().read_some(asio::buffer(chunk), ec);
      if (n > 0) {
        pending.append(chunk, n);
        drain_lines();
      }
      if (ec == asio::error::eof) break;
      if (ec) return Unavailable("stream from SPACE broke: " + ec.message());
    }
    return Status::Ok();
  });
}

std::optional<nlohmann::json> CallJson(Client& c, const std::string& method, const std::string& target,
                                       const std::string& body) {
  auto r = c.Call(method, target, body);
  Status err = !r.ok() ? r.status() : r->status >= 300 ? ResponseError(*r) : Status::Ok();
  if (err.ok() && r->body.empty()) return nlohmann::json::object();
  if (err.ok()) {
    auto j = nlohmann::json::parse(r->body, nullptr, false);
    if (!j.is_discarded()) return j;
    err = Internal("unreadable answer from the server");
  }
  std::cerr << "space: " << err.message() << "\n";
  return std::nullopt;
}

Status ResponseError(const Response& r) {
  auto j = nlohmann::json::parse(r.body, nullptr, false);
  std::string msg = "HTTP " + std::to_string(r.status);
  if (j.is_object() && j.contains("message") && j["message"].is_string()) msg = j["message"];
  StatusCode code = StatusCode::kInternal;
  switch (r.status) {
    case 400: code = StatusCode::kInvalidArgument; break;
    case 401: code = StatusCode::kUnauthenticated; break;
    case 403: code = StatusCode::kPermissionDenied; break;
    case 404: code = StatusCode::kNotFound; break;
    case 409: code = StatusCode::kConflict; break;
    case 413: code = StatusCode::kPayloadTooLarge; break;
    case 429: code = StatusCode::kResourceExhausted; break;
    case 503: code = StatusCode::kUnavailable; break;
    default: break;
  }
  return Status(code, msg);
}

std::string UrlEncode(const std::string& s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || c == '/') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

}  // namespace space::cli
