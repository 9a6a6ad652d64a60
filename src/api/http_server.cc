#include "api/http_server.h"

#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

#include <sys/socket.h>

#include <chrono>

#include "common/clock.h"
#include "common/log.h"

namespace space::api {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

// Responder over a synchronous Beast socket.
class BeastResponder : public Responder {
 public:
  BeastResponder(tcp::socket& socket, bool keep_alive) : socket_(socket), keep_alive_(keep_alive) {}

  void Send(int status, std::string_view content_type, std::string body) override {
    http::response<http::string_body> res{static_cast<http::status>(status), 11};
    res.set(http::field::server, "space");
    res.set(http::field::content_type, content_type);
    res.keep_alive(keep_alive_);
    for (const auto& [name, value] : extra_headers_) res.set(name, value);
    res.body() = std::move(body);
    res.prepare_payload();
    beast::error_code ec;
    http::write(socket_, res, ec);
    if (ec) keep_alive_ = false;
    sent_ = true;
  }

  Status StartStream(int status, std::string_view content_type) override {
    std::string head = "HTTP/1.1 " + std::to_string(status) + " " +
                       std::string(http::obsolete_reason(static_cast<http::status>(status))) +
                       "\r\nServer: space\r\nContent-Type: " + std::string(content_type) +
                       "\r\nCache-Control: no-cache\r\nConnection: close\r\n";
    for (const auto& [name, value] : extra_headers_) head += name + ": " + value + "\r\n";
    head += "\r\n";
    sent_ = true;
    keep_alive_ = false;  // the stream ends when the connection closes
    return Write(head);
  }

  Status Write(std::string_view data) override {
    beast::error_code ec;
    asio::write(socket_, asio::buffer(data.data(), data.size()), ec);
    if (ec) return Unavailable("client went away: " + ec.message());
    return Status::Ok();
  }

  bool sent() const { return sent_; }
  bool keep_alive() const { return keep_alive_; }

 private:
  tcp::socket& socket_;
  bool keep_alive_;
  bool sent_ = false;
};

Status ParseTarget(std::string_view target, Request* req) {
  size_t q = target.find('?');
  ASSIGN_OR_RETURN(req->path, UrlDecode(target.substr(0, q), false));
  if (q == std::string_view::npos) return Status::Ok();
  std::string_view qs = target.substr(q + 1);
  while (!qs.empty()) {
    size_t amp = qs.find('&');
    std::string_view pair = qs.substr(0, amp);
    qs = amp == std::string_view::npos ? std::string_view() : qs.substr(amp + 1);
    if (pair.empty()) continue;
    size_t eq = pair.find('=');
    ASSIGN_OR_RETURN(std::string k, UrlDecode(pair.substr(0, eq), true));
    std::string v;
    if (eq != std::string_view::npos) {
      ASSIGN_OR_RETURN(v, UrlDecode(pair.substr(eq + 1), true));
    }
    if (req->query.size() >= 64) return InvalidArgument("too many query parameters");
    req->query.emplace(std::move(k), std::move(v));
  }
  return Status::Ok();
}

void SendRaw(tcp::socket& socket, const Status& st) {
  BeastResponder r(socket, false);
  r.SendError(st);
}

// After refusing a request whose body is still arriving, read and drop what the client keeps
// sending (bounded in bytes and time) before closing: closing with unread data makes the
// kernel reset the connection, and the client would lose the 413 it was sent.
void DrainAndClose(tcp::socket& socket) {
  beast::error_code ec;
  socket.shutdown(tcp::socket::shutdown_send, ec);
  timeval tv{2, 0};
  ::setsockopt(socket.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  char buf[65536];
  size_t total = 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (total < (256u << 20) && std::chrono::steady_clock::now() < deadline) {
    ssize_t n = ::recv(socket.native_handle(), buf, sizeof buf, 0);
    if (n <= 0) break;
    total += static_cast<size_t>(n);
  }
}

}  // namespace

HttpServer::HttpServer(HttpServerConfig config, Handler handler)
    : config_(std::move(config)), handler_(std::move(handler)) {}

HttpServer::~HttpServer() { Stop(); }

Result<uint16_t> HttpServer::Start() {
  beast::error_code ec;
  auto addr = asio::ip::make_address(config_.address, ec);
  if (ec) return InvalidArgument("listen address " + config_.address + ": " + ec.message());
  acceptor_ = std::make_unique<tcp::acceptor>(io_);
  tcp::endpoint ep(addr, config_.port);
  acceptor_->open(ep.protocol(), ec);
  if (!ec) acceptor_->set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor_->bind(ep, ec);
  if (!ec) acceptor_->listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return Unavailable("listen on " + config_.address + ":" + std::to_string(config_.port) + ": " + ec.message());
  }
  uint16_t port = acceptor_->local_endpoint().port();
  accept_thread_ = std::thread([this] { AcceptLoop(); });
  return port;
}

void HttpServer::Stop() {
  if (stopping_.exchange(true)) return;
  if (acceptor_) {
    // close() does not wake a thread blocked in accept(); shutdown() does (EINVAL).
    ::shutdown(acceptor_->native_handle(), SHUT_RDWR);
  }
  if (accept_thread_.joinable()) accept_thread_.join();
  if (acceptor_) {
    beast::error_code ec;
    acceptor_->close(ec);
  }
}

void HttpServer::AcceptLoop() {
  while (!stopping_) {
    beast::error_code ec;
    tcp::socket socket(io_);
    acceptor_->accept(socket, ec);
    if (ec) {
      if (stopping_) return;
      LogWarn("http", "accept: " + ec.message());
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      continue;
    }
    if (connections_.load() >= config_.max_connections) {
      SendRaw(socket, Unavailable("too many connections; retry shortly"));
      continue;
    }
    ++connections_;
    std::thread([this, s = std::move(socket)]() mutable {
      Serve(std::move(s));
      --connections_;
    }).detach();
  }
}

void HttpServer::Serve(tcp::socket socket) {
  beast::error_code ec;
  socket.set_option(tcp::no_delay(true), ec);
  beast::flat_buffer buffer;
  for (;;) {
    http::request_parser<http::string_body> parser;
    parser.header_limit(static_cast<uint32_t>(config_.max_header_bytes));
    parser.body_limit(config_.max_body_bytes);
    http::read(socket, buffer, parser, ec);
    if (ec == http::error::end_of_stream || ec == asio::error::eof || ec == asio::error::connection_reset) return;
    if (ec == http::error::body_limit) {
      SendRaw(socket, PayloadTooLarge("request body exceeds " + std::to_string(config_.max_body_bytes) + " bytes"));
      DrainAndClose(socket);
      return;
    }
    if (ec == http::error::header_limit) {
      SendRaw(socket, PayloadTooLarge("request headers exceed " + std::to_string(config_.max_header_bytes) + " bytes"));
      return;
    }
    if (ec) {
      SendRaw(socket, InvalidArgument("malformed HTTP request: " + ec.message()));
      return;
    }
    auto& msg = parser.get();
    Request req;
    req.received_mono_ns = MonoNowNs();
    req.method = std::string(msg.method_string());
    for (const auto& f : msg) {
      std::string name(f.name_string());
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      req.headers[name] = std::string(f.value());
    }
    req.body = std::move(msg.body());
    BeastResponder responder(socket, msg.keep_alive());
    if (Status st = ParseTarget(msg.target(), &req); !st.ok()) {
      responder.SendError(st);
    } else {
      handler_(req, responder);
    }
    if (!responder.sent()) responder.SendError(Internal("handler sent no response"));
    if (!responder.keep_alive()) {
      socket.shutdown(tcp::socket::shutdown_both, ec);
      return;
    }
  }
}

}  // namespace space::api
