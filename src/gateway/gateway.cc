#include "gateway/gateway.h"

#include <arpa/inet.h>
#include <linux/netfilter_ipv4.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>
#include <system_error>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "common/clock.h"
#include "common/log.h"
#include "credentials/host_pattern.h"
#include "gateway/address_policy.h"
#include "gateway/gateway_impl.h"
#include "network/netlink.h"

namespace space::gateway {
namespace {

Result<UniqueFd> BindGateway(int type, uint16_t want, uint16_t* port) {
  int fd = ::socket(AF_INET, type | SOCK_CLOEXEC, 0);
  if (fd < 0) return ErrnoStatus("socket", "gateway", errno);
  UniqueFd owned(fd);
  int one = 1;
  // The gateway address appears only with the first sandbox link; bind to it beforehand.
  ::setsockopt(fd, SOL_IP, IP_FREEBIND, &one, sizeof one);
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  ASSIGN_OR_RETURN(sa.sin_addr, network::ParseIpv4(network::kGatewayAddress));
  sa.sin_port = htons(want);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    if (want == 0 || errno != EADDRINUSE) return ErrnoStatus("bind", "gateway", errno);
    LogWarn("gateway", "port " + std::to_string(want) + " is taken; using an ephemeral one");
    sa.sin_port = 0;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) return ErrnoStatus("bind", "gateway", errno);
  }
  if (type == SOCK_STREAM && ::listen(fd, 512) != 0) return ErrnoStatus("listen", "gateway", errno);
  socklen_t len = sizeof sa;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
  *port = ntohs(sa.sin_port);
  return owned;
}

std::string Ip(in_addr a) { return network::FormatIpv4(a); }

}  // namespace

Gateway::Impl::~Impl() { SSL_CTX_free(upstream_ctx); }

std::shared_ptr<const SandboxEgress> Gateway::Impl::Lookup(in_addr a) {
  ReaderMutexLock lock(&mu);
  auto it = by_address.find(a.s_addr);
  return it == by_address.end() ? nullptr : it->second;
}

void Gateway::Impl::AuditEgress(const Conn& c, const std::string& action, nlohmann::json detail) {
  Audit(*c.sandbox, "egress", action, std::move(detail));
}

void Gateway::Impl::Audit(const SandboxEgress& s, const std::string& kind, const std::string& action,
                          nlohmann::json detail) {
  ReaderMutexLock lock(&hooks_mu);
  if (hooks_live && hooks.audit) hooks.audit(s, kind, action, std::move(detail));
}

Result<std::string> Gateway::Impl::Secret(const std::string& team, const std::string& name) {
  ReaderMutexLock lock(&hooks_mu);
  if (!hooks_live || !hooks.secret) return Unavailable("the gateway is stopping");
  return hooks.secret(team, name);
}

void Gateway::Impl::DetachHooks() {
  WriterMutexLock lock(&hooks_mu);
  hooks_live = false;
}

std::vector<const SandboxEgress::Credential*> Gateway::Impl::BoundCredentials(const Conn& c, const std::string& host) {
  std::vector<const SandboxEgress::Credential*> out;
  for (const auto& cred : c.sandbox->credentials) {
    for (const auto& pattern : cred.spec.hosts) {
      if (credentials::HostMatches(pattern, host)) {
        out.push_back(&cred);
        break;
      }
    }
  }
  return out;
}

void Gateway::Impl::ReleaseConnection(const std::string& sandbox_id) {
  connections.fetch_sub(1);
  MutexLock lock(&conn_mu);
  if (--conns_per_sandbox[sandbox_id] == 0) conns_per_sandbox.erase(sandbox_id);
}

Result<in_addr> Gateway::Impl::Decide(const Conn& c, const std::string& host, uint16_t port) {
  if (!credentials::Allows(c.sandbox->profiles, host, port)) {
    return PermissionDenied("no egress profile of this sandbox allows " + host + ":" + std::to_string(port));
  }
  in_addr literal{};
  if (::inet_pton(AF_INET, host.c_str(), &literal) == 1) {
    if (IsForbiddenAddress(literal)) return PermissionDenied(host + " is never reachable from a sandbox");
    return literal;
  }
  if (host.find(':') != std::string::npos || host.find('[') != std::string::npos) {
    return PermissionDenied("IPv6 egress is not offered");
  }
  auto addrs = resolver->ResolveA(host);
  if (!addrs.ok()) return Unavailable("cannot resolve " + host + ": " + addrs.status().message());
  if (addrs->empty()) return Unavailable(host + " has no IPv4 address");
  for (in_addr a : *addrs) {
    // One bad answer taints the name: a round-robin answer must not sneak an inside address in.
    if (IsForbiddenResolvedAddress(a)) {
      return PermissionDenied(host + " resolves to " + Ip(a) + ", a loopback, private, link-local or gateway address");
    }
  }
  return addrs->front();
}

void Gateway::Impl::AcceptLoop(int listen_fd, void (*handler)(Impl&, Conn, UniqueFd)) {
  while (!stopping) {
    pollfd p{listen_fd, POLLIN, 0};
    if (::poll(&p, 1, 200) <= 0) continue;
    sockaddr_in peer{};
    socklen_t len = sizeof peer;
    int fd = ::accept4(listen_fd, reinterpret_cast<sockaddr*>(&peer), &len, SOCK_CLOEXEC);
    if (fd < 0) continue;
    UniqueFd owned(fd);
    Conn c;
    c.sandbox = Lookup(peer.sin_addr);
    if (!c.sandbox) continue;  // not a running sandbox with egress: nothing to say to it
    sockaddr_in orig{};
    len = sizeof orig;
    if (::getsockopt(fd, SOL_IP, SO_ORIGINAL_DST, &orig, &len) == 0) {
      c.original_dst = orig.sin_addr;
      c.original_port = ntohs(orig.sin_port);
    }
    const std::string sid = c.sandbox->sandbox_id;
    if (!sandbox_rate.Allow(sid, WallNowMs(), kSandboxEventsPerMin)) continue;  // closed, unaudited: a flood
    {
      MutexLock lock(&conn_mu);
      if (conns_per_sandbox[sid] >= kMaxConnectionsPerSandbox) {
        AuditEgress(c, "deny",
                    {{"reason", "more than " + std::to_string(kMaxConnectionsPerSandbox) +
                                    " open connections from this sandbox"}});
        continue;
      }
      ++conns_per_sandbox[sid];
    }
    if (connections.fetch_add(1) >= config.max_connections) {
      ReleaseConnection(sid);
      AuditEgress(c, "deny", {{"reason", "gateway connection limit reached"}});
      continue;
    }
    timeval tv{kHeadTimeoutMs / 1000, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    try {
      std::thread([self = shared_from_this(), handler, c = std::move(c), fd = std::move(owned)]() mutable {
        const std::string sid = c.sandbox->sandbox_id;
        handler(*self, std::move(c), std::move(fd));
        self->ReleaseConnection(sid);
      }).detach();
    } catch (const std::system_error&) {
      // No thread to be had (the host is out of them): this connection is refused, the
      // gateway goes on.
      ReleaseConnection(sid);
    }
  }
}

namespace {

// Adds every certificate of `pem` to the context's trust store.
Status AddTrustedPem(SSL_CTX* ctx, const std::string& pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  if (bio == nullptr) return Internal("upstream CA: " + OpenSslError());
  X509_STORE* store = SSL_CTX_get_cert_store(ctx);
  int added = 0;
  while (X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr)) {
    if (X509_STORE_add_cert(store, cert) == 1) ++added;
    X509_free(cert);
  }
  ERR_clear_error();  // the loop ends on a "no start line" error
  BIO_free(bio);
  if (added == 0) return InvalidArgument("upstream CA: no certificate in the PEM");
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<Gateway>> Gateway::Start(const GatewayConfig& config, GatewayHooks hooks) {
  ASSIGN_OR_RETURN(std::unique_ptr<CertAuthority> ca, CertAuthority::LoadOrCreate(config.ca_dir));
  return Start(config, std::move(hooks), std::move(ca));
}

Result<std::unique_ptr<Gateway>> Gateway::Start(const GatewayConfig& config, GatewayHooks hooks,
                                                std::unique_ptr<CertAuthority> ca) {
  if (!ca) return InvalidArgument("gateway: no certificate authority");
  auto impl = std::make_shared<Impl>();
  impl->config = config;
  impl->hooks = std::move(hooks);
  impl->ca = std::move(ca);
  ASSIGN_OR_RETURN(impl->resolver, Resolver::Create(config.upstream_dns));
  impl->upstream_ctx = SSL_CTX_new(TLS_client_method());
  if (!impl->upstream_ctx || SSL_CTX_set_default_verify_paths(impl->upstream_ctx) != 1) {
    return Internal("upstream TLS context: " + OpenSslError());
  }
  SSL_CTX_set_min_proto_version(impl->upstream_ctx, TLS1_2_VERSION);
  if (!config.upstream_ca_file.empty() &&
      SSL_CTX_load_verify_locations(impl->upstream_ctx, config.upstream_ca_file.c_str(), nullptr) != 1) {
    return InvalidArgument("upstream CA file " + config.upstream_ca_file + ": " + OpenSslError());
  }
  if (!config.upstream_ca_pem.empty()) RETURN_IF_ERROR(AddTrustedPem(impl->upstream_ctx, config.upstream_ca_pem));
  auto want = [&](uint16_t k) { return config.base_port ? static_cast<uint16_t>(config.base_port + k) : uint16_t{0}; };
  ASSIGN_OR_RETURN(impl->dns_fd, BindGateway(SOCK_DGRAM, want(0), &impl->ports.dns));
  ASSIGN_OR_RETURN(impl->http_fd, BindGateway(SOCK_STREAM, want(1), &impl->ports.http));
  ASSIGN_OR_RETURN(impl->tls_fd, BindGateway(SOCK_STREAM, want(2), &impl->ports.tls));
  ASSIGN_OR_RETURN(impl->proxy_fd, BindGateway(SOCK_STREAM, want(3), &impl->ports.proxy));
  ASSIGN_OR_RETURN(impl->tcp_fd, BindGateway(SOCK_STREAM, want(4), &impl->ports.tcp));
  Impl* g = impl.get();
  g->threads.emplace_back([g] { g->DnsLoop(); });
  g->threads.emplace_back([g] { g->AcceptLoop(g->http_fd.get(), HandleHttp); });
  g->threads.emplace_back([g] { g->AcceptLoop(g->tls_fd.get(), HandleTls); });
  g->threads.emplace_back([g] { g->AcceptLoop(g->proxy_fd.get(), HandleProxy); });
  g->threads.emplace_back([g] { g->AcceptLoop(g->tcp_fd.get(), HandleTcp); });
  LogInfo("gateway", "listening on " + std::string(network::kGatewayAddress) + ": dns " + std::to_string(g->ports.dns) +
                         ", http " + std::to_string(g->ports.http) + ", tls " + std::to_string(g->ports.tls) +
                         ", proxy " + std::to_string(g->ports.proxy) + ", tcp " + std::to_string(g->ports.tcp));
  return std::unique_ptr<Gateway>(new Gateway(std::move(impl)));
}

Gateway::~Gateway() { Stop(); }

void Gateway::Stop() {
  if (impl_->stopping.exchange(true)) return;
  for (auto& t : impl_->threads) t.join();
  impl_->threads.clear();
  impl_->DetachHooks();
}

network::GatewayPorts Gateway::ports() const { return impl_->ports; }
const std::string& Gateway::ca_certificate_pem() const { return impl_->ca->certificate_pem(); }

void Gateway::Register(in_addr address, std::shared_ptr<const SandboxEgress> sandbox) {
  WriterMutexLock lock(&impl_->mu);
  impl_->by_address[address.s_addr] = std::move(sandbox);
}

void Gateway::Unregister(in_addr address) {
  WriterMutexLock lock(&impl_->mu);
  impl_->by_address.erase(address.s_addr);
}

void SendHttpError(Stream& s, int code, const std::string& reason, const std::string& message) {
  std::string body = "{\"code\":\"egress_denied\",\"message\":" + nlohmann::json(message).dump() + "}\n";
  std::string resp =
      "HTTP/1.1 " + std::to_string(code) + " " + reason +
      "\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: " + std::to_string(body.size()) +
      "\r\n\r\n" + body;
  (void)s.Write(resp, 5000);
  s.ShutdownWrite();
}

}  // namespace space::gateway
