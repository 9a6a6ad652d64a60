#include "front/forwarder.h"

#include <sys/socket.h>

#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/read.hpp>
#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

#include <algorithm>
#include <cctype>
#include <optional>
#include <string>

#include "common/byte_relay.h"
#include "common/clock.h"
#include "common/datagram.h"
#include "common/log.h"
#include "common/syscall.h"
#include "http/http_server.h"

namespace space::front {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

// Connection-level headers (RFC 9110 7.6.1) and the client's framing: the front re-frames the
// request with its own Content-Length and Connection: close.
bool HopByHop(const std::string& lower) {
  static const char* const kNames[] = {"connection", "keep-alive", "proxy-connection", "proxy-authenticate",
                                       "proxy-authorization", "te", "trailer", "transfer-encoding",
                                       "upgrade", "content-length", "expect"};
  return std::any_of(std::begin(kNames), std::end(kNames), [&](const char* n) { return lower == n; });
}

// Response headers the front's own responder writes itself.
bool SetByResponder(const std::string& lower, bool stream) {
  return HopByHop(lower) || lower == "server" || lower == "content-type" || (stream && lower == "cache-control");
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

Status NodeFailed(const std::string& what, const beast::error_code& ec) {
  return Unavailable("the node did not answer (" + what + ": " + ec.message() + "); retry shortly");
}

}  // namespace

Result<std::unique_ptr<Forwarder::NodeStream>> Forwarder::Connect() {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    return ErrnoStatus("socketpair", "connection to the node", errno);
  }
  UniqueFd mine(sv[0]), theirs(sv[1]);
  {
    std::lock_guard<std::mutex> lock(send_mu_);
    RETURN_IF_ERROR(SendDatagram(channel_, "c", {theirs.get()}, api::kConnectionChannelLimits));
  }
  auto stream = std::make_unique<NodeStream>(io_);
  beast::error_code ec;
  stream->assign(NodeStream::protocol_type(AF_UNIX, SOCK_STREAM), mine.release(), ec);
  if (ec) return Internal("connection to the node: " + ec.message());
  return stream;
}

std::unique_ptr<Forwarder::NodeStream> Forwarder::TakeIdle() {
  std::lock_guard<std::mutex> lock(pool_mu_);
  const int64_t now = MonoNowNs();
  while (!idle_.empty()) {
    Idle last = std::move(idle_.back());
    idle_.pop_back();
    if (now - last.since_ns < kIdleKeepNs) return std::move(last.stream);
  }
  return nullptr;
}

void Forwarder::PutIdle(std::unique_ptr<NodeStream> stream) {
  std::lock_guard<std::mutex> lock(pool_mu_);
  if (idle_.size() < kMaxIdle) idle_.push_back({std::move(stream), MonoNowNs()});
}

void Forwarder::Handle(api::Request& req, api::Responder& res) {
  http::request<http::string_body> out;
  out.version(11);
  out.method_string(req.method);
  out.target(req.target);
  for (const auto& [name, value] : req.headers) {
    if (!HopByHop(name)) out.set(name, value);
  }
  out.keep_alive(true);
  // An upgrade (a WebSocket to a preview port) keeps its headers: the node's ingress hands
  // them to the sandbox's server, which answers the upgrade itself.
  if (auto up = req.headers.find("upgrade"); up != req.headers.end()) {
    out.set(http::field::upgrade, up->second);
    out.set(http::field::connection, "upgrade");
  }
  out.body() = std::move(req.body);
  out.prepare_payload();

  // A kept connection may have been closed by the node (idle) just as it was taken; the node
  // then never read this request, so it is sent once more on a new connection.
  std::unique_ptr<NodeStream> node = TakeIdle();
  bool reused = node != nullptr;
  beast::flat_buffer buffer;
  std::optional<http::response_parser<http::empty_body>> head;
  beast::error_code ec;
  for (;;) {
    if (!node) {
      Result<std::unique_ptr<NodeStream>> fresh = Connect();
      if (!fresh.ok()) {
        LogWarn("front", fresh.status().ToString());
        return res.SendError(Unavailable("the node is not answering; retry shortly"));
      }
      node = std::move(*fresh);
    }
    head.emplace();
    head->header_limit(64 * 1024);
    head->body_limit(kMaxRelayedBodyBytes);  // checked against Content-Length with the header
    if (req.method == "HEAD") head->skip(true);
    ec = {};
    http::write(*node, out, ec);
    if (!ec) http::read_header(*node, buffer, *head, ec);
    if (!ec) break;
    if (!reused || buffer.size() != 0) return res.SendError(NodeFailed("response", ec));
    reused = false;
    node.reset();
  }
  const auto& msg = head->get();
  const int status = static_cast<int>(msg.result_int());
  if (status == 101 && msg[http::field::upgrade] == api::kIngressUpgrade) return Relay(res, *node, buffer);
  const std::string content_type(msg[http::field::content_type]);
  const bool stream = !head->is_done() && head->need_eof();
  const bool keep = msg.keep_alive() && !stream;
  for (const auto& f : msg) {
    std::string name = Lower(f.name_string());
    if (!SetByResponder(name, stream)) res.AddHeader(std::string(f.name_string()), std::string(f.value()));
  }
  if (head->is_done()) {
    if (keep) PutIdle(std::move(node));
    return res.Send(status, content_type, "");
  }
  if (!stream) {
    http::response_parser<http::string_body> whole(std::move(*head));
    whole.body_limit(kMaxRelayedBodyBytes);
    http::read(*node, buffer, whole, ec);
    if (ec) return res.SendError(NodeFailed("response body", ec));
    if (keep) PutIdle(std::move(node));
    return res.Send(status, content_type, std::move(whole.get().body()));
  }
  // A stream ends when the node closes it. Relay what arrives as it arrives; a client that
  // went away ends it from this side (closing makes the node's next write fail).
  if (!res.StartStream(status, content_type).ok()) return;
  std::string chunk(beast::buffers_to_string(buffer.data()));
  buffer.consume(buffer.size());
  if (!chunk.empty() && !res.Write(chunk).ok()) return;
  char buf[64 * 1024];
  for (;;) {
    size_t n = node->read_some(asio::buffer(buf, sizeof buf), ec);
    if (n > 0 && !res.Write(std::string_view(buf, n)).ok()) return;
    if (ec) return;
  }
}

void Forwarder::Relay(api::Responder& res, NodeStream& node, beast::flat_buffer& buffer) {
  // From here the node's bytes are the sandbox server's, whatever protocol they are; the
  // client's go back to the node as they come. Neither side's HTTP is parsed again here.
  Result<api::Responder::RawConnection> client = res.TakeConnection();
  if (!client.ok()) return;
  // Bulk bytes both ways in large pieces (capped by net.core.wmem_max; best effort).
  int bytes = 4 << 20;
  (void)::setsockopt(client->fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes);
  (void)::setsockopt(node.native_handle(), SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes);
  std::string from_node = beast::buffers_to_string(buffer.data());
  buffer.consume(buffer.size());
  RelayBytes(client->fd, node.native_handle(), client->leftover, from_node, kRelayIdleMs);
}

}  // namespace space::front
