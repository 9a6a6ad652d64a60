#include "gateway/stream.h"

#include <fcntl.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/x509v3.h>

#include "common/clock.h"
#include "gateway/ca.h"

namespace space::gateway {
namespace {

int64_t NowMs() { return MonoNowNs() / 1000000; }

Status PollFd(int fd, short events, int timeout_ms) {
  pollfd p{fd, events, 0};
  int r = ::poll(&p, 1, timeout_ms < 0 ? 0 : timeout_ms);
  if (r < 0) return ErrnoStatus("poll", "gateway stream", errno);
  if (r == 0) return DeadlineExceeded("timed out");
  return Status::Ok();
}

}  // namespace

Stream::Stream(UniqueFd fd) : fd_(std::move(fd)) {
  int fl = ::fcntl(fd_.get(), F_GETFL);
  ::fcntl(fd_.get(), F_SETFL, fl | O_NONBLOCK);
  // A relay forwards what it has at once: Nagle here would hold a segment back until the far
  // side's delayed ACK (40 ms per exchange, measured in bench/egress.py).
  int one = 1;
  ::setsockopt(fd_.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

Stream::~Stream() { SSL_free(ssl_); }

Status Stream::WaitSsl(int ret, int deadline_ms, const char* what) {
  int err = SSL_get_error(ssl_, ret);
  short ev;
  if (err == SSL_ERROR_WANT_READ) {
    ev = POLLIN;
  } else if (err == SSL_ERROR_WANT_WRITE) {
    ev = POLLOUT;
  } else {
    std::string detail = err == SSL_ERROR_SYSCALL ? std::string("connection closed") : OpenSslError();
    ERR_clear_error();
    return Unavailable(std::string(what) + ": " + detail);
  }
  Status st = PollFd(fd_.get(), ev, static_cast<int>(deadline_ms - NowMs()));
  if (!st.ok()) return st.Annotate(what);
  return Status::Ok();
}

Status Stream::AcceptTls(SSL_CTX* ctx, int timeout_ms) {
  ssl_ = SSL_new(ctx);
  if (!ssl_ || SSL_set_fd(ssl_, fd_.get()) != 1) return Internal("SSL_new: " + OpenSslError());
  int64_t deadline = NowMs() + timeout_ms;
  for (;;) {
    int r = SSL_accept(ssl_);
    if (r == 1) return Status::Ok();
    RETURN_IF_ERROR(WaitSsl(r, static_cast<int>(deadline), "tls accept"));
  }
}

Status Stream::ConnectTls(SSL_CTX* ctx, const std::string& host, int timeout_ms) {
  ssl_ = SSL_new(ctx);
  if (!ssl_ || SSL_set_fd(ssl_, fd_.get()) != 1) return Internal("SSL_new: " + OpenSslError());
  SSL_set_tlsext_host_name(ssl_, host.c_str());
  SSL_set_hostflags(ssl_, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
  if (SSL_set1_host(ssl_, host.c_str()) != 1) return Internal("SSL_set1_host: " + OpenSslError());
  SSL_set_verify(ssl_, SSL_VERIFY_PEER, nullptr);
  int64_t deadline = NowMs() + timeout_ms;
  for (;;) {
    int r = SSL_connect(ssl_);
    if (r == 1) return Status::Ok();
    if (SSL_get_error(ssl_, r) == SSL_ERROR_SSL) {
      long v = SSL_get_verify_result(ssl_);
      ERR_clear_error();
      if (v != X509_V_OK) {
        return Unavailable("upstream certificate for " + host + " rejected: " + X509_verify_cert_error_string(v));
      }
    }
    RETURN_IF_ERROR(WaitSsl(r, static_cast<int>(deadline), "tls connect"));
  }
}

bool Stream::HasBuffered() const { return ssl_ != nullptr && SSL_pending(ssl_) > 0; }

Result<size_t> Stream::Read(char* buf, size_t len, int timeout_ms) {
  int64_t deadline = NowMs() + timeout_ms;
  for (;;) {
    if (ssl_) {
      size_t n = 0;
      int r = SSL_read_ex(ssl_, buf, len, &n);
      if (r == 1) return n;
      int err = SSL_get_error(ssl_, r);
      if (err == SSL_ERROR_ZERO_RETURN) return size_t{0};
      if (err == SSL_ERROR_SYSCALL && ERR_peek_error() == 0) {
        ERR_clear_error();
        return size_t{0};  // peer closed without close_notify: treat as end of stream
      }
      RETURN_IF_ERROR(WaitSsl(r, static_cast<int>(deadline), "tls read"));
      continue;
    }
    ssize_t n = ::recv(fd_.get(), buf, len, 0);
    if (n >= 0) return static_cast<size_t>(n);
    if (errno == EINTR) continue;
    if (errno == ECONNRESET) return size_t{0};
    if (errno != EAGAIN) return ErrnoStatus("recv", "gateway stream", errno);
    RETURN_IF_ERROR(PollFd(fd_.get(), POLLIN, static_cast<int>(deadline - NowMs())));
  }
}

Status Stream::Write(std::string_view data, int timeout_ms) {
  int64_t deadline = NowMs() + timeout_ms;
  while (!data.empty()) {
    if (ssl_) {
      size_t n = 0;
      int r = SSL_write_ex(ssl_, data.data(), data.size(), &n);
      if (r == 1) {
        data.remove_prefix(n);
        continue;
      }
      RETURN_IF_ERROR(WaitSsl(r, static_cast<int>(deadline), "tls write"));
      continue;
    }
    ssize_t n = ::send(fd_.get(), data.data(), data.size(), MSG_NOSIGNAL);
    if (n >= 0) {
      data.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN) return ErrnoStatus("send", "gateway stream", errno);
    RETURN_IF_ERROR(PollFd(fd_.get(), POLLOUT, static_cast<int>(deadline - NowMs())));
  }
  return Status::Ok();
}

void Stream::ShutdownWrite() {
  if (ssl_) {
    SSL_shutdown(ssl_);  // best effort close_notify
    ERR_clear_error();
  }
  ::shutdown(fd_.get(), SHUT_WR);
}

Result<std::unique_ptr<Stream>> ConnectTcp(in_addr addr, uint16_t port, int timeout_ms) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return ErrnoStatus("socket", "upstream", errno);
  UniqueFd owned(fd);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  sa.sin_addr = addr;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    if (errno != EINPROGRESS) return ErrnoStatus("connect", "upstream", errno);
    RETURN_IF_ERROR(PollFd(fd, POLLOUT, timeout_ms).Annotate("connect upstream"));
    int err = 0;
    socklen_t len = sizeof err;
    ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) return ErrnoStatus("connect", "upstream", err);
  }
  return std::make_unique<Stream>(std::move(owned));
}

namespace {

// Moves what is readable on `from` to `to` through `pipe` without copying it to user space.
// Returns bytes moved, 0 at end of stream, -1 on error or when `to` stays blocked too long.
ssize_t SpliceOnce(int from, int to, const int pipe[2], int idle_ms) {
  ssize_t in = ::splice(from, nullptr, pipe[1], nullptr, 1 << 20, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
  if (in < 0) return errno == EAGAIN ? -2 : -1;
  if (in == 0) return 0;
  ssize_t left = in;
  while (left > 0) {
    ssize_t out = ::splice(pipe[0], nullptr, to, nullptr, static_cast<size_t>(left), SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
    if (out > 0) {
      left -= out;
      continue;
    }
    if (out < 0 && errno != EAGAIN) return -1;
    if (!PollFd(to, POLLOUT, idle_ms).ok()) return -1;
  }
  return in;
}

// Relay between two plain sockets with splice(2): the kernel moves the bytes.
RelayCounts SpliceRelay(Stream& a, Stream& b, int idle_ms) {
  RelayCounts counts;
  int pipes[2][2];
  if (::pipe2(pipes[0], O_CLOEXEC | O_NONBLOCK) != 0) return counts;
  if (::pipe2(pipes[1], O_CLOEXEC | O_NONBLOCK) != 0) {
    ::close(pipes[0][0]);
    ::close(pipes[0][1]);
    return counts;
  }
  Stream* sides[2] = {&a, &b};
  bool open[2] = {true, true};
  uint64_t* count[2] = {&counts.up, &counts.down};
  while (open[0] || open[1]) {
    pollfd fds[2];
    int idx[2];
    int nfds = 0;
    for (int i = 0; i < 2; ++i) {
      if (open[i]) {
        idx[nfds] = i;
        fds[nfds++] = {sides[i]->fd(), POLLIN, 0};
      }
    }
    if (::poll(fds, static_cast<nfds_t>(nfds), idle_ms) <= 0) break;
    bool failed = false;
    for (int k = 0; k < nfds && !failed; ++k) {
      if (!(fds[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      int i = idx[k];
      ssize_t n = SpliceOnce(sides[i]->fd(), sides[1 - i]->fd(), pipes[i], idle_ms);
      if (n == -2) continue;
      if (n < 0) failed = true;
      if (n == 0) {
        open[i] = false;
        sides[1 - i]->ShutdownWrite();
      }
      if (n > 0) *count[i] += static_cast<uint64_t>(n);
    }
    if (failed) break;
  }
  for (auto& p : pipes) {
    ::close(p[0]);
    ::close(p[1]);
  }
  return counts;
}

}  // namespace

RelayCounts Relay(Stream& a, Stream& b, int idle_ms) {
  if (!a.is_tls() && !b.is_tls()) return SpliceRelay(a, b, idle_ms);
  RelayCounts counts;
  bool a_open = true, b_open = true;  // whether each side may still send to us
  char buf[65536];
  while (a_open || b_open) {
    Stream* sides[2] = {&a, &b};
    bool* open[2] = {&a_open, &b_open};
    uint64_t* count[2] = {&counts.up, &counts.down};
    pollfd fds[2];
    int nfds = 0;
    bool buffered = false;
    for (int i = 0; i < 2; ++i) {
      if (*open[i]) {
        fds[nfds++] = {sides[i]->fd(), POLLIN, 0};
        buffered |= sides[i]->HasBuffered();
      }
    }
    if (!buffered) {
      int r = ::poll(fds, static_cast<nfds_t>(nfds), idle_ms);
      if (r <= 0) break;  // idle or error
    }
    for (int i = 0; i < 2; ++i) {
      if (!*open[i]) continue;
      auto n = sides[i]->Read(buf, sizeof buf, 0);
      if (!n.ok()) {
        if (n.status().code() == StatusCode::kDeadlineExceeded) continue;  // nothing yet
        return counts;
      }
      if (*n == 0) {
        *open[i] = false;
        sides[1 - i]->ShutdownWrite();
        continue;
      }
      if (!sides[1 - i]->Write(std::string_view(buf, *n), idle_ms).ok()) return counts;
      *count[i] += *n;
    }
  }
  return counts;
}

}  // namespace space::gateway
