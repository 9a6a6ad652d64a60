#include "ingress/ingress.h"

#include <sys/socket.h>
#include <sys/time.h>

#include <cerrno>
#include <thread>
#include <vector>

#include "http/http_server.h"
#include "http/preview_host.h"
#include "ingress/upstream_request.h"
#include "protocol/protocol.h"

namespace space::ingress {
namespace {

// No bytes from the sandbox's server for this long ends a preview connection (a long poll or
// a quiet WebSocket included), and a client that stops reading for it too.
constexpr int64_t kIdleMs = 600'000;

bool SendAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

}  // namespace

bool Ingress::Handle(api::Request& req, api::Responder& res) {
  const std::string host = req.Header("host");
  std::optional<api::PreviewHost> ph = api::ParsePreviewHost(host, ports_->config().domain);
  if (!ph) return false;
  Result<node::Ports::Target> target = ports_->Resolve(ph->label, ph->port);
  if (!target.ok()) {
    res.SendError(target.status());
    return true;
  }
  const store::PortRecord& port = target->port;
  if (req.HasQuery(kTokenQuery) && !port.is_public) {
    // Opening `url?token=`: the token becomes a cookie of this host only, and the browser
    // goes on to the same address without it (so it stays out of history and Referer).
    if (!node::Ports::TokenMatches(port, req.Query(kTokenQuery))) {
      res.SendError(Unauthenticated("wrong token for this preview port"));
      return true;
    }
    // Only a path of this host: a target like "//elsewhere/" would send the browser away.
    std::string location = TargetWithoutToken(req.target);
    if (location.empty() || location[0] != '/' ||
        (location.size() > 1 && (location[1] == '/' || location[1] == '\\'))) {
      location = "/";
    }
    res.AddHeader("Location", location);
    res.AddHeader("Set-Cookie",
                  std::string(kTokenCookie) + "=" + req.Query(kTokenQuery) + "; Path=/; HttpOnly; SameSite=Lax");
    res.AddHeader("Cache-Control", "no-store");
    res.Send(302, "text/plain", "");
    return true;
  }
  if (!node::Ports::TokenMatches(port, PresentedToken(req))) {
    res.SendError(Unauthenticated(PresentedToken(req).empty()
                                      ? "this preview port is private: send its token in X-Space-Port-Token, or open "
                                        "the URL with ?token= once"
                                      : "wrong token for this preview port"));
    return true;
  }
  if (Status st = ports_->Admit(target->sandbox.id); !st.ok()) {
    res.AddHeader("Retry-After", "1");
    res.SendError(st);
    return true;
  }
  Result<std::unique_ptr<node::PreviewConnection>> conn = ports_->Connect(*target);
  if (!conn.ok()) {
    res.SendError(conn.status());
    return true;
  }
  Relay(req, res, **conn);
  return true;
}

void Ingress::Relay(api::Request& req, api::Responder& res, node::PreviewConnection& conn) {
  node::TcpTunnel& tunnel = conn.tunnel();
  const bool upgrade = IsUpgrade(req);
  // The request goes while the guest still connects; the first bytes of the answer (or why
  // there is none) decide whether this is still an HTTP error or the relay.
  std::vector<char> buf(guest::kTcpChunk);
  // A refusal that arrives while the request is still being sent fails the write with the
  // guest's reason, as it would fail the read.
  Status sent = tunnel.Write(UpstreamRequest(req, req.Header("host")), kIdleMs);
  Result<size_t> first = sent.ok() ? tunnel.Read(buf.data(), buf.size(), kIdleMs) : Result<size_t>(sent);
  if (!first.ok() || *first == 0) {
    // Nothing listens on the port, or the server hung up without a byte: the gateway's 502.
    const std::string why =
        first.ok() ? "the sandbox's server closed the connection without answering" : first.status().message();
    res.SendJson(first.ok() || first.status().code() == StatusCode::kUnavailable ? 502 : 504,
                 {{"code", "unavailable"}, {"message", why}});
    return;
  }
  Result<api::Responder::RawConnection> raw = res.TakeConnection();
  if (!raw.ok()) return;
  const int fd = raw->fd;
  timeval tv{kIdleMs / 1000, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  // Bulk answers move in large pieces towards the front (capped by net.core.wmem_max).
  int bytes = 4 << 20;
  (void)::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes);
  const std::string head = std::string("HTTP/1.1 101 Switching Protocols\r\nUpgrade: ") + api::kIngressUpgrade +
                           "\r\nConnection: upgrade\r\n\r\n";
  if (!SendAll(fd, head) || !SendAll(fd, std::string_view(buf.data(), *first))) return;
  // The client's bytes after the request: only an upgraded connection carries more (a plain
  // request was asked to close after its answer).
  std::thread up;
  if (upgrade) {
    up = std::thread([&tunnel, fd, leftover = std::move(raw->leftover)] {
      if (!leftover.empty() && !tunnel.Write(leftover, kIdleMs).ok()) return;
      std::vector<char> in(guest::kTcpChunk);
      for (;;) {
        ssize_t n = ::recv(fd, in.data(), in.size(), 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
          (void)tunnel.ShutdownWrite();
          return;
        }
        if (!tunnel.Write(std::string_view(in.data(), static_cast<size_t>(n)), kIdleMs).ok()) return;
      }
    });
  }
  for (;;) {
    Result<size_t> n = tunnel.Read(buf.data(), buf.size(), kIdleMs);
    if (!n.ok() || *n == 0) break;
    if (!SendAll(fd, std::string_view(buf.data(), *n))) break;
  }
  ::shutdown(fd, SHUT_RDWR);  // ends the upward thread's read, and tells the front
  tunnel.Close();
  if (up.joinable()) up.join();
}

}  // namespace space::ingress
