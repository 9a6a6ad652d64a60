// HTTP through the gateway: transparent (port 80), explicit (absolute-form requests and
// CONNECT on gateway:3128), and requests inside TLS the gateway terminated. One request per
// connection: the upstream is asked to close after its response, so a second request on the
// same connection can never slip past the checks made on the first.
#include <arpa/inet.h>
#include <poll.h>
#include <sys/socket.h>

#include "common/clock.h"
#include "gateway/gateway_impl.h"
#include "gateway/http_head.h"
#include "gateway/tls_hello.h"
#include "network/netlink.h"

namespace space::gateway {
namespace {

// Reads until a whole request head is in `*buf`, within kHeadTimeoutMs overall (a client
// trickling bytes does not get a fresh timeout per byte).
Result<RequestHead> ReadHead(Stream& s, std::string* buf) {
  char chunk[8192];
  const int64_t deadline = MonoNowNs() / 1000000 + kHeadTimeoutMs;
  for (;;) {
    auto head = ParseRequestHead(*buf);
    if (head.ok() || head.status().code() != StatusCode::kNotFound) return head;
    int64_t left = deadline - MonoNowNs() / 1000000;
    if (left <= 0) return DeadlineExceeded("request head not complete in time");
    ASSIGN_OR_RETURN(size_t n, s.Read(chunk, sizeof chunk, static_cast<int>(left)));
    if (n == 0) return Unavailable("client closed before sending a request");
    buf->append(chunk, n);
  }
}

std::string Format(const std::string& format, const std::string& secret) {
  std::string out = format;
  size_t at = out.find("{secret}");
  if (at != std::string::npos) out.replace(at, 8, secret);
  return out;
}

}  // namespace

void ServeHttpRequest(Gateway::Impl& g, const Conn& c, Stream& client, std::string buf, const std::string& fixed_host,
                      uint16_t port, bool upstream_tls) {
  const char* proto = upstream_tls ? "https" : "http";
  auto head_or = ReadHead(client, &buf);
  if (!head_or.ok()) {
    if (head_or.status().code() == StatusCode::kInvalidArgument) {
      SendHttpError(client, 400, "Bad Request", head_or.status().message());
      g.AuditEgress(c, "deny", {{"proto", proto}, {"reason", head_or.status().message()}});
    }
    return;
  }
  RequestHead head = std::move(*head_or);
  auto refuse = [&](int code, const char* reason, const std::string& host, uint16_t p, const std::string& why) {
    SendHttpError(client, code, reason, why);
    g.AuditEgress(c, "deny", {{"proto", proto}, {"host", host}, {"port", p}, {"method", head.method}, {"reason", why}});
  };
  // Where the request goes: the absolute-form authority (explicit proxy) or the Host header.
  std::string authority;
  if (head.target.rfind("http://", 0) == 0 && fixed_host.empty() && !upstream_tls) {
    std::string rest = head.target.substr(7);
    size_t slash = rest.find('/');
    authority = rest.substr(0, slash);
    head.target = slash == std::string::npos ? "/" : rest.substr(slash);
  } else if (head.target.empty() || (head.target[0] != '/' && head.target != "*")) {
    return refuse(400, "Bad Request", "", port, "request target must be origin-form (use CONNECT for https)");
  }
  if (head.Count("host") != 1) return refuse(400, "Bad Request", "", port, "exactly one Host header is required");
  std::string host_header = head.Get("host");
  auto hp = SplitHostPort(host_header, port);
  if (!hp.ok()) return refuse(400, "Bad Request", "", port, "Host header: " + hp.status().message());
  if (!authority.empty()) {
    auto ap = SplitHostPort(authority, 80);
    if (!ap.ok() || *ap != *hp) return refuse(400, "Bad Request", hp->first, hp->second, "Host header does not match the request URI");
    port = ap->second;
  } else if (hp->second != port) {
    return refuse(400, "Bad Request", hp->first, hp->second, "Host header port does not match the connection's port");
  }
  const std::string host = hp->first;
  if (!fixed_host.empty() && host != fixed_host) {
    return refuse(421, "Misdirected Request", host, port, "Host header " + host + " does not match the TLS server name " + fixed_host);
  }
  auto addr = g.Decide(c, host, port);
  if (!addr.ok()) return refuse(403, "Forbidden", host, port, addr.status().message());

  // Credentials: the placeholder in the credential's own header becomes the secret, for the
  // hosts the credential is bound to. Anything else is left exactly as the sandbox sent it.
  std::vector<std::string> used;
  for (const auto* cred : g.BoundCredentials(c, host)) {
    std::string value = head.Get(cred->spec.header);
    if (value.find(cred->placeholder) == std::string::npos) continue;
    nlohmann::json detail = {{"credential", cred->spec.name}, {"host", host}, {"port", port}};
    int64_t now = WallNowMs();
    if (cred->spec.expires_at_ms != 0 && now >= cred->spec.expires_at_ms) {
      g.Audit(*c.sandbox, "credential", "expired", detail);
      return refuse(403, "Forbidden", host, port, "credential " + cred->spec.name + " has expired");
    }
    if (!g.rate.Allow(c.sandbox->team + "/" + cred->spec.name, now, cred->spec.rate_limit_per_min)) {
      g.Audit(*c.sandbox, "credential", "rate_limited", detail);
      return refuse(429, "Too Many Requests", host, port, "credential " + cred->spec.name + " is over its rate limit");
    }
    auto secret = g.Secret(c.sandbox->team, cred->spec.name);
    if (!secret.ok()) {
      g.Audit(*c.sandbox, "credential", "unavailable", detail);
      return refuse(502, "Bad Gateway", host, port, "credential " + cred->spec.name + " is not available");
    }
    head.Set(cred->spec.header, Format(cred->spec.format, *secret));
    g.Audit(*c.sandbox, "credential", "use", detail);
    used.push_back(cred->spec.name);
  }

  for (const char* h : {"Proxy-Connection", "Proxy-Authorization", "Connection", "Keep-Alive"}) head.Remove(h);
  head.Set("Connection", "close");
  auto upstream = ConnectTcp(*addr, port, kConnectTimeoutMs);
  if (upstream.ok() && upstream_tls) {
    if (Status st = (*upstream)->ConnectTls(g.upstream_ctx, host, kConnectTimeoutMs); !st.ok()) upstream = st;
  }
  if (!upstream.ok()) return refuse(502, "Bad Gateway", host, port, "upstream: " + upstream.status().message());
  std::string out = head.Serialize();
  out.append(buf, head.head_size, std::string::npos);
  if (!(*upstream)->Write(out, g.config.idle_timeout_ms).ok()) return;
  RelayCounts n = Relay(client, **upstream, g.config.idle_timeout_ms);
  g.AuditEgress(c, "allow", {{"proto", proto}, {"host", host}, {"port", port}, {"method", head.method},
                             {"address", network::FormatIpv4(*addr)}, {"bytes_up", n.up + out.size()},
                             {"bytes_down", n.down}, {"credentials", used}});
}

void HandleHttp(Gateway::Impl& g, Conn c, UniqueFd fd) {
  Stream client(std::move(fd));
  ServeHttpRequest(g, c, client, "", "", c.original_port, false);
}

void HandleProxy(Gateway::Impl& g, Conn c, UniqueFd fd) {
  auto client = std::make_unique<Stream>(std::move(fd));
  std::string buf;
  auto parsed = ReadHead(*client, &buf);
  if (!parsed.ok()) {
    if (parsed.status().code() == StatusCode::kInvalidArgument) {
      SendHttpError(*client, 400, "Bad Request", parsed.status().message());
    }
    return;
  }
  RequestHead head = std::move(*parsed);
  if (head.method != "CONNECT") {
    ServeHttpRequest(g, c, *client, std::move(buf), "", 80, false);
    return;
  }
  auto hp = SplitHostPort(head.target, 0);
  if (!hp.ok() || hp->second == 0 || buf.size() != head.head_size) {
    SendHttpError(*client, 400, "Bad Request", "CONNECT needs host:port and nothing before the reply");
    return;
  }
  auto [host, port] = *hp;
  if (!credentials::Allows(c.sandbox->profiles, host, port)) {
    SendHttpError(*client, 403, "Forbidden", "no egress profile of this sandbox allows " + host + ":" + std::to_string(port));
    g.AuditEgress(c, "deny", {{"proto", "connect"}, {"host", host}, {"port", port}, {"reason", "not allowed"}});
    return;
  }
  if (!client->Write("HTTP/1.1 200 Connection established\r\n\r\n", 5000).ok()) return;
  // What the tunnel carries decides how it is checked: TLS by its SNI, HTTP by its Host.
  char first = 0;
  pollfd p{client->fd(), POLLIN, 0};
  if (::poll(&p, 1, kHeadTimeoutMs) <= 0) return;
  if (::recv(client->fd(), &first, 1, MSG_PEEK) != 1) return;
  if (first == 0x16) {
    ServeTls(g, c, std::move(client), host, port);
  } else {
    ServeHttpRequest(g, c, *client, "", host, port, false);
  }
}

}  // namespace space::gateway
