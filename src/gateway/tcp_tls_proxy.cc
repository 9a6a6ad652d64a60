// TLS through the gateway, decided on the ClientHello's server name. The hello is peeked, not
// read: a tunnel relays it untouched; an interception hands it to OpenSSL.
#include <poll.h>
#include <sys/socket.h>

#include <arpa/inet.h>

#include "gateway/gateway_impl.h"
#include "gateway/tls_hello.h"
#include "network/netlink.h"

namespace space::gateway {
namespace {

HelloResult PeekHello(int fd, std::string* sni) {
  std::string buf(kMaxClientHello, '\0');
  for (int waited = 0; waited < kHeadTimeoutMs; waited += 50) {
    ssize_t n = ::recv(fd, buf.data(), buf.size(), MSG_PEEK | MSG_DONTWAIT);
    if (n == 0) return HelloResult::kNotTls;
    if (n > 0) {
      HelloResult r = ParseClientHelloSni(std::string_view(buf.data(), static_cast<size_t>(n)), sni);
      if (r != HelloResult::kNeedMore) return r;
      if (static_cast<size_t>(n) == buf.size()) return HelloResult::kNotTls;
    } else if (errno != EAGAIN && errno != EINTR) {
      return HelloResult::kNotTls;
    }
    pollfd p{fd, POLLIN, 0};
    ::poll(&p, 1, 50);  // more of the hello, or (if it is all here) a short pause
  }
  return HelloResult::kNotTls;
}

}  // namespace

void ServeTls(Gateway::Impl& g, const Conn& c, std::unique_ptr<Stream> client, const std::string& fixed_host,
              uint16_t port) {
  std::string sni;
  HelloResult hello = PeekHello(client->fd(), &sni);
  auto deny = [&](const std::string& host, const std::string& why) {
    g.AuditEgress(c, "deny", {{"proto", "tls"}, {"host", host}, {"port", port}, {"reason", why}});
  };
  std::string host;
  switch (hello) {
    case HelloResult::kNeedMore:
    case HelloResult::kNotTls:
      return deny(fixed_host, "not a TLS ClientHello");
    case HelloResult::kNoSni:
      // Without a name only an address can be judged: the CONNECT authority, or where the
      // sandbox was connecting to (CIDR rules only).
      host = fixed_host.empty() ? network::FormatIpv4(c.original_dst) : fixed_host;
      break;
    case HelloResult::kSni:
      if (!fixed_host.empty() && sni != fixed_host) {
        return deny(sni, "TLS server name " + sni + " does not match CONNECT " + fixed_host);
      }
      host = sni;
      break;
  }
  auto addr = g.Decide(c, host, port);
  if (!addr.ok()) return deny(host, addr.status().message());
  in_addr literal{};
  bool is_name = ::inet_pton(AF_INET, host.c_str(), &literal) != 1;
  if (is_name && !g.BoundCredentials(c, host).empty()) {
    // A credential is bound here: terminate TLS with the node's CA so its header can be set.
    // `ctx` is a reference of this thread's own: the CA's cache may evict the name meanwhile.
    auto ctx = g.ca->ServerContextFor(host);
    if (!ctx.ok()) return deny(host, ctx.status().message());
    if (Status st = client->AcceptTls(ctx->get(), kHeadTimeoutMs); !st.ok()) {
      return deny(host, "TLS handshake: " + st.message());
    }
    ServeHttpRequest(g, c, *client, "", host, port, true);
    return;
  }
  auto upstream = ConnectTcp(*addr, port, kConnectTimeoutMs);
  if (!upstream.ok()) return deny(host, "upstream: " + upstream.status().message());
  RelayCounts n = Relay(*client, **upstream, g.config.idle_timeout_ms);
  g.AuditEgress(c, "allow",
                {{"proto", "tls"},
                 {"host", host},
                 {"port", port},
                 {"address", network::FormatIpv4(*addr)},
                 {"bytes_up", n.up},
                 {"bytes_down", n.down}});
}

void HandleTls(Gateway::Impl& g, Conn c, UniqueFd fd) {
  ServeTls(g, c, std::make_unique<Stream>(std::move(fd)), "", c.original_port);
}

void HandleTcp(Gateway::Impl& g, Conn c, UniqueFd fd) {
  Stream client(std::move(fd));
  std::string ip = network::FormatIpv4(c.original_dst);
  auto addr = g.Decide(c, ip, c.original_port);
  if (!addr.ok()) {
    g.AuditEgress(c, "deny",
                  {{"proto", "tcp"}, {"host", ip}, {"port", c.original_port}, {"reason", addr.status().message()}});
    return;
  }
  auto upstream = ConnectTcp(*addr, c.original_port, kConnectTimeoutMs);
  if (!upstream.ok()) {
    g.AuditEgress(c, "deny",
                  {{"proto", "tcp"}, {"host", ip}, {"port", c.original_port}, {"reason", upstream.status().message()}});
    return;
  }
  RelayCounts n = Relay(client, **upstream, g.config.idle_timeout_ms);
  g.AuditEgress(
      c, "allow",
      {{"proto", "tcp"}, {"host", ip}, {"port", c.original_port}, {"bytes_up", n.up}, {"bytes_down", n.down}});
}

}  // namespace space::gateway
