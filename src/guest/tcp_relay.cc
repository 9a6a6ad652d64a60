// spaced's side of a preview port (protocol.h, "tcp"): a connection to a port of the
// sandbox's own loopback, its bytes relayed to the node in kTcpData frames. The node is the
// only way in: nothing outside the sandbox connects to the sandbox's network for it.
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/log.h"
#include "common/syscall.h"
#include "guest/event_loop.h"
#include "protocol/json_util.h"

namespace space::guest {
namespace {

constexpr std::string_view kLog = "spaced";
// An ack goes back once this much was written to the socket (or the node's bytes are all
// out), so the node's window reopens in large steps, not one frame at a time.
constexpr uint32_t kAckEvery = 256 * 1024;

Result<UniqueFd> ConnectLoopback(uint16_t port, bool v6) {
  UniqueFd s(::socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!s) return ErrnoStatus("socket", "tcp relay", errno);
  int one = 1;
  ::setsockopt(s.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  int rc;
  if (v6) {
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_port = htons(port);
    a.sin6_addr = in6addr_loopback;
    rc = ::connect(s.get(), reinterpret_cast<sockaddr*>(&a), sizeof a);
  } else {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    rc = ::connect(s.get(), reinterpret_cast<sockaddr*>(&a), sizeof a);
  }
  if (rc != 0 && errno != EINPROGRESS) return ErrnoStatus("connect", "port " + std::to_string(port), errno);
  return s;
}

}  // namespace

void GuestDaemon::OpenTcp(const Frame& f) {
  if (!CanOpenStream(f.stream, "tcp open")) return;
  if (tcp_.size() >= kMaxTcpStreams) {
    return SendError(f.stream, ResourceExhausted("the sandbox has " + std::to_string(kMaxTcpStreams) +
                                                 " preview connections open already"));
  }
  Result<nlohmann::json> j = ParseJsonObject(f.payload, "tcp open");
  if (!j.ok()) return SendError(f.stream, j.status());
  const nlohmann::json& port = (*j)["port"];
  if (!port.is_number_unsigned() || port.get<uint64_t>() < 1 || port.get<uint64_t>() > 65535) {
    return SendError(f.stream, InvalidArgument("tcp open: port must be 1..65535"));
  }
  // 127.0.0.1 first: a server bound to 0.0.0.0 or to loopback answers there. One bound to
  // ::1 only is tried next, when that is refused (TcpConnected).
  const uint16_t p = static_cast<uint16_t>(port.get<uint64_t>());
  Result<UniqueFd> s = ConnectLoopback(p, false);
  if (!s.ok()) {
    return SendError(f.stream, Unavailable("nothing listens on port " + std::to_string(p) + " in the sandbox"));
  }
  TcpRelay& t = tcp_[f.stream];
  t.sock = std::move(*s);
  t.port = p;
  TcpInterest(f.stream, t);
}

void GuestDaemon::TcpInterest(uint32_t stream, TcpRelay& t) {
  uint32_t want = 0;
  if (t.connecting) {
    want = EPOLLOUT;
  } else {
    if (!t.sock_eof && !paused_ && t.in_flight < kTcpWindow) want |= EPOLLIN | EPOLLRDHUP;
    if (!t.to_sock.empty()) want |= EPOLLOUT;
  }
  if (want == t.events && (want == 0) == (t.token == 0)) return;
  if (t.token != 0) {
    ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, t.sock.get(), nullptr);
    watches_.erase(t.token);
    t.token = 0;
  }
  t.events = want;
  if (want != 0) t.token = AddWatch(t.sock.get(), want, Source::kTcp, stream);
}

void GuestDaemon::TcpEvent(uint32_t stream, uint32_t events) {
  auto it = tcp_.find(stream);
  if (it == tcp_.end()) return;
  TcpRelay& t = it->second;
  if (t.connecting) return TcpConnected(stream, t);
  if (events & EPOLLHUP) {
    // Closed both ways by the server: nothing more can be written, and once what it sent
    // is read the stream is over (epoll keeps reporting a hang-up, so it must end).
    t.to_sock.clear();
    if (t.sock_eof) return CloseTcp(stream, true);
  }
  if (events & (EPOLLOUT | EPOLLERR)) {
    TcpWrite(stream, t);
    it = tcp_.find(stream);
    if (it == tcp_.end()) return;
  }
  if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) TcpRead(stream, it->second);
}

void GuestDaemon::TcpConnected(uint32_t stream, TcpRelay& t) {
  int err = 0;
  socklen_t len = sizeof err;
  if (::getsockopt(t.sock.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
  if (err != 0 && !t.v6) {
    Result<UniqueFd> s = ConnectLoopback(t.port, true);
    if (s.ok()) {
      if (t.token != 0) {
        ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, t.sock.get(), nullptr);
        watches_.erase(t.token);
        t.token = 0;
        t.events = 0;
      }
      t.sock = std::move(*s);
      t.v6 = true;
      return TcpInterest(stream, t);
    }
  }
  if (err != 0) {
    const uint16_t port = t.port;
    tcp_.erase(stream);  // closes the socket; the node hears why
    return SendError(stream, Unavailable("nothing listens on port " + std::to_string(port) + " in the sandbox (" +
                                         std::strerror(err) + ")"));
  }
  t.connecting = false;
  Send(FrameType::kTcpOpened, stream, "{}");
  TcpInterest(stream, t);
}

void GuestDaemon::TcpFromNode(const Frame& f) {
  auto it = tcp_.find(f.stream);
  if (it == tcp_.end()) return;  // closed already; the node learns from our kTcpClose
  TcpRelay& t = it->second;
  if (f.payload.empty()) {
    t.node_eof = true;
  } else if (t.node_eof || t.to_sock.size() + f.payload.size() > kTcpWindow) {
    LogWarn(kLog, "tcp stream " + std::to_string(f.stream) + ": the node overran its window; closing");
    return CloseTcp(f.stream, true);
  } else {
    t.to_sock += f.payload;
  }
  if (!t.connecting) TcpWrite(f.stream, t);
}

void GuestDaemon::TcpAckFromNode(const Frame& f) {
  auto it = tcp_.find(f.stream);
  if (it == tcp_.end()) return;
  Result<uint32_t> n = ParseTcpAck(f.payload);
  if (!n.ok() || *n > it->second.in_flight) {
    LogWarn(kLog, "tcp stream " + std::to_string(f.stream) + ": invalid ack; closing");
    return CloseTcp(f.stream, true);
  }
  it->second.in_flight -= *n;
  TcpInterest(f.stream, it->second);
}

void GuestDaemon::TcpWrite(uint32_t stream, TcpRelay& t) {
  while (!t.to_sock.empty()) {
    ssize_t n = RetryEintr([&] { return ::send(t.sock.get(), t.to_sock.data(), t.to_sock.size(), MSG_NOSIGNAL); });
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    if (n < 0) return CloseTcp(stream, true);  // the server reset it
    t.to_sock.erase(0, static_cast<size_t>(n));
    t.written += static_cast<uint32_t>(n);
  }
  if (t.written >= kAckEvery || (t.to_sock.empty() && t.written > 0)) {
    Send(FrameType::kTcpAck, stream, EncodeTcpAck(t.written));
    t.written = 0;
  }
  if (t.to_sock.empty() && t.node_eof && !t.shut_wr) {
    ::shutdown(t.sock.get(), SHUT_WR);
    t.shut_wr = true;
    if (t.sock_eof) return CloseTcp(stream, true);
  }
  TcpInterest(stream, t);
}

void GuestDaemon::TcpRead(uint32_t stream, TcpRelay& t) {
  static char buf[kTcpChunk];  // one thread runs the loop
  // A few chunks per wakeup, within the window, while the outbox has room: fair to the other
  // streams, and a slow node pauses the reading (UpdateBackpressure).
  for (int i = 0; i < 4 && !t.sock_eof && !paused_ && t.in_flight < kTcpWindow; ++i) {
    size_t room = std::min<size_t>(sizeof buf, kTcpWindow - t.in_flight);
    ssize_t n = RetryEintr([&] { return ::recv(t.sock.get(), buf, room, 0); });
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    if (n < 0) return CloseTcp(stream, true);
    if (n == 0) {
      t.sock_eof = true;
      Send(FrameType::kTcpData, stream, {});
      if (t.shut_wr) return CloseTcp(stream, true);
      break;
    }
    t.in_flight += static_cast<uint32_t>(n);
    Send(FrameType::kTcpData, stream, std::string_view(buf, static_cast<size_t>(n)));
    if (done_) return;
  }
  TcpInterest(stream, t);
}

void GuestDaemon::CloseTcp(uint32_t stream, bool tell_node) {
  auto it = tcp_.find(stream);
  if (it == tcp_.end()) return;
  if (it->second.token != 0) {
    ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, it->second.sock.get(), nullptr);
    watches_.erase(it->second.token);
  }
  tcp_.erase(it);
  if (tell_node) Send(FrameType::kTcpClose, stream, {});
}

}  // namespace space::guest
