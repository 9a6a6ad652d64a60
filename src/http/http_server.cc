#include "http/http_server.h"

#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

#include <fcntl.h>
#include <poll.h>
#include <netinet/in.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "common/clock.h"
#include "common/datagram.h"
#include "common/log.h"

namespace space::api {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using Stream = HttpServer::Stream;

namespace {

// How long Start keeps trying a fixed port that is still in use.
constexpr int kBindRetrySeconds = 10;

// A synchronous stream over the connection's socket whose reads fail with timed_out after a
// deadline and whose writes fail after a stall (no progress) timeout. Asio's own blocking
// calls wait forever (they poll with no timeout after EAGAIN, so SO_RCVTIMEO does not help);
// this waits with poll() first and only then reads or writes what is ready.
class TimedSocket {
 public:
  TimedSocket(Stream& socket, int write_stall_timeout_ms)
      : socket_(socket), write_stall_timeout_ms_(write_stall_timeout_ms) {}

  int native_handle() { return socket_.native_handle(); }
  // Reads fail once the monotonic clock passes `mono_ns`.
  void set_read_deadline(int64_t mono_ns) { read_deadline_ns_ = mono_ns; }

  template <class Buffers>
  size_t read_some(const Buffers& buffers, beast::error_code& ec) {
    int64_t left_ms = (read_deadline_ns_ - MonoNowNs()) / 1'000'000;
    if (!WaitReady(POLLIN, static_cast<int>(std::clamp<int64_t>(left_ms, 0, INT32_MAX)), ec)) return 0;
    return socket_.read_some(buffers, ec);
  }
  template <class Buffers>
  size_t read_some(const Buffers& buffers) {
    beast::error_code ec;
    size_t n = read_some(buffers, ec);
    if (ec) throw beast::system_error(ec);
    return n;
  }
  template <class Buffers>
  size_t write_some(const Buffers& buffers, beast::error_code& ec) {
    if (!WaitReady(POLLOUT, write_stall_timeout_ms_, ec)) return 0;
    return socket_.write_some(buffers, ec);
  }
  template <class Buffers>
  size_t write_some(const Buffers& buffers) {
    beast::error_code ec;
    size_t n = write_some(buffers, ec);
    if (ec) throw beast::system_error(ec);
    return n;
  }

 private:
  // True once the socket is ready for `events` (or has an error the next call reports).
  bool WaitReady(short events, int timeout_ms, beast::error_code& ec) {
    pollfd p{socket_.native_handle(), events, 0};
    int64_t deadline = MonoNowNs() + int64_t{timeout_ms} * 1'000'000;
    for (;;) {
      int rc = ::poll(&p, 1, timeout_ms);
      if (rc > 0) return true;
      if (rc == 0) {
        ec = asio::error::timed_out;
        return false;
      }
      if (errno != EINTR) {
        ec = beast::error_code(errno, beast::system_category());
        return false;
      }
      timeout_ms = static_cast<int>(std::max<int64_t>(0, (deadline - MonoNowNs()) / 1'000'000));
    }
  }

  Stream& socket_;
  const int write_stall_timeout_ms_;
  int64_t read_deadline_ns_ = 0;
};

// Responder over a synchronous Beast socket.
class BeastResponder : public Responder {
 public:
  BeastResponder(TimedSocket& socket, bool keep_alive, beast::flat_buffer* buffer = nullptr)
      : socket_(socket), keep_alive_(keep_alive), buffer_(buffer) {}

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

  Result<RawConnection> TakeConnection() override {
    if (sent_) return Internal("a response was sent already");
    sent_ = true;
    keep_alive_ = false;
    RawConnection raw;
    raw.fd = socket_.native_handle();
    if (buffer_ != nullptr) {
      raw.leftover = beast::buffers_to_string(buffer_->data());
      buffer_->consume(buffer_->size());
    }
    return raw;
  }

  bool sent() const { return sent_; }
  bool keep_alive() const { return keep_alive_; }

 private:
  TimedSocket& socket_;
  bool keep_alive_;
  beast::flat_buffer* const buffer_;
  bool sent_ = false;
};

void SendRaw(TimedSocket& socket, const Status& st) {
  BeastResponder r(socket, false);
  r.SendError(st);
}

// After refusing a request whose body is still arriving, read and drop what the client keeps
// sending (bounded in bytes and time) before closing: closing with unread data makes the
// kernel reset the connection, and the client would lose the 413 it was sent.
void DrainAndClose(Stream& socket) {
  beast::error_code ec;
  socket.shutdown(Stream::shutdown_send, ec);
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

Result<UniqueFd> ListenTcp(const std::string& address, uint16_t port) {
  beast::error_code ec;
  auto addr = asio::ip::make_address(address, ec);
  if (ec) return InvalidArgument("listen address " + address + ": " + ec.message());
  tcp::endpoint ep(addr, port);
  asio::io_context io;
  // A restarted service may briefly find its port held by a predecessor still exiting. (The
  // fleet test's node once found it held for good: sandbox launch children, cloned with a copy
  // of the node's fds, waited on each other for ever after the node died. They now close that
  // copy first, runtime/ns/launcher.cc.) Bounded retry, logged once.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(kBindRetrySeconds);
  bool warned = false;
  for (;;) {
    ec = {};
    tcp::acceptor acceptor(io);
    acceptor.open(ep.protocol(), ec);
    // Asio opens sockets without SOCK_CLOEXEC; no program the node runs may inherit the API.
    if (!ec && ::fcntl(acceptor.native_handle(), F_SETFD, FD_CLOEXEC) != 0) {
      ec = beast::error_code(errno, boost::system::system_category());
    }
    if (!ec) acceptor.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) acceptor.bind(ep, ec);
    if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
    if (!ec) return UniqueFd(acceptor.release());
    if (ec != asio::error::address_in_use || port == 0 || std::chrono::steady_clock::now() > give_up) break;
    if (!warned) {
      LogWarn("http", "listen on " + address + ":" + std::to_string(port) + ": in use; retrying for " +
                          std::to_string(kBindRetrySeconds) + " s");
      warned = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  return Unavailable("listen on " + address + ":" + std::to_string(port) + ": " + ec.message());
}

Result<uint16_t> ListeningPort(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return ErrnoStatus("getsockname", "listening socket", errno);
  }
  if (addr.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  if (addr.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
  return InvalidArgument("listening socket is not TCP");
}

HttpServer::HttpServer(HttpServerConfig config, Handler handler)
    : config_(std::move(config)), handler_(std::move(handler)) {}

HttpServer::~HttpServer() { Stop(); }

Result<uint16_t> HttpServer::Start() {
  UniqueFd owned;
  int fd = config_.listen_fd;
  if (fd < 0) {
    ASSIGN_OR_RETURN(owned, ListenTcp(config_.address, config_.port));
    fd = owned.get();
  }
  ASSIGN_OR_RETURN(uint16_t port, ListeningPort(fd));
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  beast::error_code ec;
  acceptor_ = std::make_unique<tcp::acceptor>(io_);
  acceptor_->assign(addr.ss_family == AF_INET6 ? tcp::v6() : tcp::v4(), fd, ec);
  if (ec) return Unavailable("adopt listening socket: " + ec.message());
  (void)owned.release();  // the acceptor owns it now
  // Accepts only after poll says a client waits (AcceptLoop), so the accept never blocks.
  acceptor_->non_blocking(true, ec);
  if (ec) return Unavailable("listening socket: non-blocking: " + ec.message());
  accept_wake_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!accept_wake_.valid()) return ErrnoStatus("eventfd", "accept loop", errno);
  accept_thread_ = std::thread([this] { AcceptLoop(); });
  return port;
}

void HttpServer::Stop() {
  if (stopping_.exchange(true)) return;
  std::vector<std::thread> channel_threads;
  {
    // Wakes the channel threads blocked in recvmsg (EOF); they end and close their channel.
    std::lock_guard<std::mutex> lock(channels_mu_);
    for (int fd : channels_) ::shutdown(fd, SHUT_RDWR);
    channel_threads.swap(channel_threads_);
  }
  for (std::thread& t : channel_threads) t.join();
  if (accept_wake_.valid()) {
    const uint64_t one = 1;
    (void)!::write(accept_wake_.get(), &one, sizeof one);
  }
  if (accept_thread_.joinable()) accept_thread_.join();
  if (acceptor_) {
    beast::error_code ec;
    acceptor_->close(ec);
  }
  // Open connections: shut down (which wakes a thread waiting for a request or writing a
  // stream), then wait a little for their threads to let go. A handler busy in the node (a
  // long exec) may outlast the wait; `space dev` exits without destructors for that reason.
  std::unique_lock<std::mutex> lock(conns_mu_);
  for (Stream* conn : open_) ::shutdown(conn->native_handle(), SHUT_RDWR);
  conns_cv_.wait_for(lock, std::chrono::seconds(5), [this] { return open_.empty(); });
}

void HttpServer::AcceptLoop() {
  while (!stopping_) {
    // Waits in poll, not in accept: a thread killed while blocked in accept(2) still dequeues
    // a client that arrives before it runs again (the kernel looks at the queue before the
    // pending signal), and that client is reset as the process dies. An API front killed that
    // way would lose it; from poll, the client stays queued for the next front.
    pollfd p[2] = {{acceptor_->native_handle(), POLLIN, 0}, {accept_wake_.get(), POLLIN, 0}};
    if (::poll(p, 2, -1) < 0) {
      if (errno != EINTR) {
        LogWarn("http", std::string("poll: ") + std::strerror(errno));
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      continue;
    }
    if (stopping_ || p[1].revents != 0) return;
    beast::error_code ec;
    tcp::socket socket(io_);
    acceptor_->accept(socket, ec);
    if (!ec) (void)::fcntl(socket.native_handle(), F_SETFD, FD_CLOEXEC);
    if (ec == asio::error::would_block || ec == asio::error::try_again) continue;  // taken or gone
    if (ec) {
      if (stopping_) return;
      LogWarn("http", "accept: " + ec.message());
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      continue;
    }
    socket.set_option(tcp::no_delay(true), ec);
    Dispatch(Stream(std::move(socket)));
  }
}

void HttpServer::Dispatch(Stream socket) {
  auto conn = std::make_unique<Stream>(std::move(socket));
  {
    std::lock_guard<std::mutex> lock(conns_mu_);
    if (!stopping_ && open_.size() < static_cast<size_t>(config_.max_connections)) {
      open_.insert(conn.get());
      ++served_;
      std::thread([this, conn = std::move(conn)]() mutable {
        Serve(*conn);
        // The connection goes while Stop may still be waiting for it (it holds conns_mu_ to
        // look), so it never outlives the io_context it was made on.
        std::lock_guard<std::mutex> lock(conns_mu_);
        open_.erase(conn.get());
        conn.reset();
        conns_cv_.notify_all();
      }).detach();
      return;
    }
  }
  TimedSocket timed(*conn, 1000);
  SendRaw(timed, Unavailable(stopping_ ? "the server is stopping" : "too many connections; retry shortly"));
}

void HttpServer::ServeChannel(UniqueFd channel) {
  std::lock_guard<std::mutex> lock(channels_mu_);
  if (stopping_) return;
  channels_.push_back(channel.get());
  channel_threads_.emplace_back([this, channel = std::move(channel)]() mutable {
    for (;;) {
      // One connection per datagram: a byte of payload and the connection's descriptor.
      Result<Datagram> d = ReceiveDatagram(channel.get(), kConnectionChannelLimits);
      if (!d.ok()) {
        if (d.status().code() == StatusCode::kInvalidArgument) continue;  // refused, fds closed
        break;  // the front is gone (or we are stopping)
      }
      if (d->fds.size() != 1) continue;
      int conn = d->fds[0].release();
      beast::error_code ec;
      Stream socket(io_);
      socket.assign(Stream::protocol_type(AF_UNIX, SOCK_STREAM), conn, ec);
      if (ec) {
        ::close(conn);
        continue;
      }
      Dispatch(std::move(socket));
    }
    std::lock_guard<std::mutex> lock(channels_mu_);
    channels_.erase(std::find(channels_.begin(), channels_.end(), channel.get()));
  });
}

void HttpServer::Serve(Stream& socket) {
  beast::error_code ec;
  TimedSocket timed(socket, config_.write_stall_timeout_ms);
  beast::flat_buffer buffer;
  for (;;) {
    // Idle keep-alive: wait for the first byte of the next request (none may be buffered).
    if (buffer.size() == 0) {
      timed.set_read_deadline(MonoNowNs() + int64_t{config_.idle_timeout_ms} * 1'000'000);
      size_t n = timed.read_some(buffer.prepare(4096), ec);
      buffer.commit(n);
      if (ec) return;  // idle timeout, end of stream or reset: close quietly
    }
    http::request_parser<http::string_body> parser;
    parser.header_limit(static_cast<uint32_t>(config_.max_header_bytes));
    parser.body_limit(config_.max_body_bytes);
    timed.set_read_deadline(MonoNowNs() + int64_t{config_.header_timeout_ms} * 1'000'000);
    http::read_header(timed, buffer, parser, ec);
    if (!ec && !parser.is_done()) {
      // The body may take its size at the floor rate, plus a grace period. A chunked body has
      // no size up front: it is bounded by the largest body allowed.
      uint64_t expected = parser.content_length().value_or(config_.max_body_bytes);
      uint64_t body_ms = expected * 1000 / std::max<size_t>(1, config_.body_min_bytes_per_s);
      timed.set_read_deadline(MonoNowNs() + (int64_t{config_.body_grace_ms} + static_cast<int64_t>(body_ms)) * 1'000'000);
      http::read(timed, buffer, parser, ec);
    }
    if (ec == http::error::end_of_stream || ec == asio::error::eof || ec == asio::error::connection_reset) return;
    if (ec == asio::error::timed_out) {
      LogWarn("http", "dropped a connection whose request did not arrive in time");
      return;
    }
    if (ec == http::error::body_limit) {
      SendRaw(timed, PayloadTooLarge("request body exceeds " + std::to_string(config_.max_body_bytes) + " bytes"));
      DrainAndClose(socket);
      return;
    }
    if (ec == http::error::header_limit) {
      SendRaw(timed, PayloadTooLarge("request headers exceed " + std::to_string(config_.max_header_bytes) + " bytes"));
      return;
    }
    if (ec) {
      SendRaw(timed, InvalidArgument("malformed HTTP request: " + ec.message()));
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
    req.target = std::string(msg.target());
    BeastResponder responder(timed, msg.keep_alive(), &buffer);
    if (Status st = ParseTarget(msg.target(), &req); !st.ok()) {
      responder.SendError(st);
    } else {
      handler_(req, responder);
    }
    if (!responder.sent()) responder.SendError(Internal("handler sent no response"));
    if (!responder.keep_alive()) {
      socket.shutdown(Stream::shutdown_both, ec);
      return;
    }
  }
}

}  // namespace space::api
