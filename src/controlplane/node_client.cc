#include "controlplane/node_client.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <array>
#include <limits>
#include <set>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

namespace space::controlplane {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

// Headers that describe one hop, not the message (RFC 9110 §7.6.1), plus those Beast sets
// itself from the body.
bool IsHopHeader(const std::string& lower) {
  static const std::set<std::string> kHop = {"connection", "keep-alive", "proxy-connection", "te", "trailer",
                                             "transfer-encoding", "upgrade", "content-length", "host"};
  return kHop.count(lower) > 0;
}

// The longest a node may take to start answering a relayed request (its ?wait=true waits
// are shorter).
constexpr int kHeadTimeoutMs = 10 * 60 * 1000;

// A node host that vanishes (power, partition) sends no RST: probe an idle connection after
// 30 s, and give up on unacknowledged data after 60 s.
void KeepAlive(tcp::socket& s) {
  int on = 1, idle = 30, interval = 10, count = 3;
  unsigned int user_timeout_ms = 60000;
  ::setsockopt(s.native_handle(), SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
  ::setsockopt(s.native_handle(), IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
  ::setsockopt(s.native_handle(), IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof interval);
  ::setsockopt(s.native_handle(), IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof count);
  ::setsockopt(s.native_handle(), IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout_ms, sizeof user_timeout_ms);
}

void SetTimeouts(tcp::socket& s, int timeout_ms) {
  timeval tv{timeout_ms / 1000, (timeout_ms % 1000) * 1000};
  ::setsockopt(s.native_handle(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  ::setsockopt(s.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
}

// Opens a connection to the node; connect and sends give up after `timeout_ms` (SO_SNDTIMEO
// bounds connect(2) on Linux).
Result<tcp::socket> Connect(asio::io_context& io, const std::string& node_url, int timeout_ms) {
  ASSIGN_OR_RETURN(auto hp, ParseNodeUrl(node_url));
  beast::error_code ec;
  auto addr = asio::ip::make_address(hp.first, ec);
  if (ec) return InvalidArgument("node url " + node_url + ": host must be an IP address");
  tcp::socket s(io);
  s.open(addr.is_v4() ? tcp::v4() : tcp::v6(), ec);
  if (ec) return Unavailable("socket: " + ec.message());
  SetTimeouts(s, timeout_ms);
  s.connect(tcp::endpoint(addr, hp.second), ec);
  if (ec) return Unavailable("node at " + node_url + " unreachable: " + ec.message());
  s.set_option(tcp::no_delay(true), ec);
  return s;
}

http::request<http::string_body> MakeRequest(const std::string& method, const std::string& target,
                                             const std::string& host, std::string body) {
  http::request<http::string_body> out;
  out.method_string(method);
  out.target(target);
  out.version(11);
  out.set(http::field::host, host);
  out.set(http::field::connection, "close");
  out.body() = std::move(body);
  out.prepare_payload();
  return out;
}

}  // namespace

Result<std::pair<std::string, uint16_t>> ParseNodeUrl(const std::string& url) {
  constexpr std::string_view kScheme = "http://";
  if (url.compare(0, kScheme.size(), kScheme) != 0) return InvalidArgument("node url must start with http://: " + url);
  std::string rest = url.substr(kScheme.size());
  while (!rest.empty() && rest.back() == '/') rest.pop_back();
  size_t colon = rest.rfind(':');
  if (colon == std::string::npos || colon == 0) return InvalidArgument("node url needs host:port: " + url);
  std::string host = rest.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  char* end = nullptr;
  long port = std::strtol(rest.c_str() + colon + 1, &end, 10);
  if (*end != '\0' || port <= 0 || port > 65535) return InvalidArgument("bad port in node url: " + url);
  return std::make_pair(host, static_cast<uint16_t>(port));
}

Status Forward(const std::string& node_url, const api::Request& req, api::Responder& res) {
  asio::io_context io;
  ASSIGN_OR_RETURN(tcp::socket sock, Connect(io, node_url, 5000));
  auto out = MakeRequest(req.method, req.target, node_url.substr(7), req.body);
  // Headers the client names in Connection are hop-by-hop too; X-Space-Team is what a server
  // itself asserts to a node (with the fleet token), never a client's to pass on.
  std::set<std::string> drop;
  for (std::string_view rest = req.Header("connection"); !rest.empty();) {
    size_t comma = rest.find(',');
    std::string token(rest.substr(0, comma));
    token.erase(0, token.find_first_not_of(" \t"));
    token.erase(token.find_last_not_of(" \t") + 1);
    for (char& c : token) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    drop.insert(token);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
  }
  for (const auto& [name, value] : req.headers) {
    if (!IsHopHeader(name) && !drop.count(name) && name != "x-space-team") out.set(name, value);
  }
  out.prepare_payload();
  beast::error_code ec;
  http::write(sock, out, ec);
  if (ec) return Unavailable("send to node at " + node_url + ": " + ec.message());
  // The answer's head may take as long as the longest ?wait=true the node allows; then
  // streams (process output, SSE) may stay quiet for long, so reads wait as long as the
  // node's host is alive, which TCP keepalive and TCP_USER_TIMEOUT find out.
  SetTimeouts(sock, kHeadTimeoutMs);
  KeepAlive(sock);
  beast::flat_buffer buf;
  http::response_parser<http::buffer_body> parser;
  parser.body_limit(std::numeric_limits<std::uint64_t>::max());
  http::read_header(sock, buf, parser, ec);
  if (ec) return Unavailable("no answer from node at " + node_url + ": " + ec.message());
  SetTimeouts(sock, 0);
  const auto& h = parser.get();
  const int status = static_cast<int>(h.result_int());
  const std::string content_type(h[http::field::content_type]);
  for (const auto& f : h) {
    std::string name(f.name_string());
    std::string lower = name;
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (IsHopHeader(lower) || lower == "content-type" || lower == "server" || lower == "cache-control") continue;
    res.AddHeader(name, std::string(f.value()));
  }
  // A small whole answer goes back as one response (the client keeps its connection); a
  // stream or a large body is relayed as it arrives.
  auto length = parser.content_length();
  const bool whole = length && *length <= (1u << 20);
  std::string body;
  if (!whole && !res.StartStream(status, content_type).ok()) return Status::Ok();
  std::array<char, 65536> chunk;
  while (!parser.is_done()) {
    parser.get().body().data = chunk.data();
    parser.get().body().size = chunk.size();
    http::read(sock, buf, parser, ec);
    if (ec == http::error::need_buffer) ec = {};
    size_t n = chunk.size() - parser.get().body().size;
    if (whole) {
      body.append(chunk.data(), n);
    } else if (n > 0 && !res.Write(std::string_view(chunk.data(), n)).ok()) {
      break;  // the client went away
    }
    if (ec) break;
  }
  if (!whole) return Status::Ok();
  if (ec) {
    res.SendError(Unavailable("node at " + node_url + " broke off its answer: " + ec.message()));
  } else {
    res.Send(status, content_type, std::move(body));
  }
  return Status::Ok();
}

Result<CallResult> Call(const std::string& node_url, const std::string& method, const std::string& target,
                        const std::string& body, const std::map<std::string, std::string>& headers, int timeout_ms) {
  asio::io_context io;
  ASSIGN_OR_RETURN(tcp::socket sock, Connect(io, node_url, timeout_ms));
  auto out = MakeRequest(method, target, node_url.substr(7), body);
  if (!body.empty()) out.set(http::field::content_type, "application/json");
  for (const auto& [name, value] : headers) out.set(name, value);
  beast::error_code ec;
  http::write(sock, out, ec);
  if (ec) return Unavailable("send to node at " + node_url + ": " + ec.message());
  beast::flat_buffer buf;
  http::response_parser<http::string_body> p;
  p.body_limit(16u << 20);
  http::read(sock, buf, p, ec);
  if (ec) return Unavailable("read from node at " + node_url + ": " + ec.message());
  return CallResult{static_cast<int>(p.get().result_int()), std::move(p.get().body())};
}

}  // namespace space::controlplane
