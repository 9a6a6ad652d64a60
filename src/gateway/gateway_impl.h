// Internals shared by the gateway's listeners and connection handlers (gateway.cc,
// dns_server.cc, http_proxy.cc, tls_proxy.cc, tcp_proxy.cc). Not part of the interface.
#pragma once

#include <netinet/in.h>

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "common/unique_fd.h"
#include "credentials/credential.h"
#include "gateway/ca.h"
#include "gateway/gateway.h"
#include "gateway/resolver.h"
#include "gateway/stream.h"

namespace space::gateway {

inline constexpr int kHeadTimeoutMs = 30000;
inline constexpr int kConnectTimeoutMs = 10000;
// Per sandbox, so one sandbox cannot take the gateway (or the audit log) from the others:
// concurrent connections, and new connections plus DNS queries per minute (a token bucket:
// bursts up to the limit, refilled over the minute).
inline constexpr int kMaxConnectionsPerSandbox = 128;
inline constexpr int kSandboxEventsPerMin = 6000;

// One accepted connection from a sandbox: who it is and where it was going.
struct Conn {
  std::shared_ptr<const SandboxEgress> sandbox;
  in_addr original_dst{};  // before the firewall's redirect
  uint16_t original_port = 0;
};

struct Gateway::Impl : std::enable_shared_from_this<Gateway::Impl> {
  GatewayConfig config;
  GatewayHooks hooks;
  std::unique_ptr<CertAuthority> ca;
  std::unique_ptr<Resolver> resolver;
  SSL_CTX* upstream_ctx = nullptr;
  network::GatewayPorts ports;

  UniqueFd dns_fd, http_fd, tls_fd, proxy_fd, tcp_fd;
  std::vector<std::thread> threads;
  std::atomic<bool> stopping{false};
  std::atomic<int> connections{0};
  credentials::RateLimiter rate;          // credential uses
  credentials::RateLimiter sandbox_rate;  // connections and DNS queries per sandbox
  Mutex conn_mu;
  std::map<std::string, int> conns_per_sandbox GUARDED_BY(conn_mu);

  SharedMutex hooks_mu;
  bool hooks_live GUARDED_BY(hooks_mu) = true;

  SharedMutex mu;
  std::map<uint32_t, std::shared_ptr<const SandboxEgress>> by_address GUARDED_BY(mu);

  ~Impl();
  std::shared_ptr<const SandboxEgress> Lookup(in_addr a) EXCLUDES(mu);
  void AcceptLoop(int listen_fd, void (*handler)(Impl&, Conn, UniqueFd)) EXCLUDES(conn_mu);
  // Undoes the counting of one accepted connection of `sandbox_id`.
  void ReleaseConnection(const std::string& sandbox_id) EXCLUDES(conn_mu);
  void DnsLoop();

  void AuditEgress(const Conn& c, const std::string& action, nlohmann::json detail);
  // The hooks, until Stop(): connection threads may outlive the gateway's owner, and must
  // then reach nothing of it.
  void Audit(const SandboxEgress& s, const std::string& kind, const std::string& action, nlohmann::json detail)
      EXCLUDES(hooks_mu);
  Result<std::string> Secret(const std::string& team, const std::string& name) EXCLUDES(hooks_mu);
  void DetachHooks() EXCLUDES(hooks_mu);
  // Whether the sandbox's profiles allow host:port, and the address to connect to: a name is
  // resolved here (never trusting the sandbox's own lookup) and refused when it resolves
  // into a forbidden range; an IP literal needs a CIDR rule. Denials are audited by caller.
  Result<in_addr> Decide(const Conn& c, const std::string& host, uint16_t port);
  // The credentials of this sandbox bound to `host`.
  std::vector<const SandboxEgress::Credential*> BoundCredentials(const Conn& c, const std::string& host);
};

// Connection handlers, each on its own thread; they own the accepted socket.
void HandleHttp(Gateway::Impl& g, Conn c, UniqueFd fd);   // transparent port 80
void HandleTls(Gateway::Impl& g, Conn c, UniqueFd fd);    // transparent port 443
void HandleProxy(Gateway::Impl& g, Conn c, UniqueFd fd);  // explicit proxy (3128)
void HandleTcp(Gateway::Impl& g, Conn c, UniqueFd fd);    // any other port, CIDR rules only

// Serves one HTTP request read from `client` (plain, or TLS the gateway terminated). With
// `fixed_host` set (the SNI or CONNECT authority) the Host header must name it.
void ServeHttpRequest(Gateway::Impl& g, const Conn& c, Stream& client, std::string buffered,
                      const std::string& fixed_host, uint16_t port, bool upstream_tls);
// Serves a TLS connection whose ClientHello is waiting unread on `client`: SNI policy, then
// interception (credential bound to the host) or a byte-for-byte tunnel. With `fixed_host`
// (CONNECT) the SNI must equal it.
void ServeTls(Gateway::Impl& g, const Conn& c, std::unique_ptr<Stream> client, const std::string& fixed_host,
              uint16_t port);

// Writes a short HTTP error response and records nothing.
void SendHttpError(Stream& s, int code, const std::string& reason, const std::string& message);

}  // namespace space::gateway
