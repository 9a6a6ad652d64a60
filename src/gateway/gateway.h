// Gateway: the one egress point of a node (docs/egress.md). Sandboxes reach nothing but this;
// the firewall (network/firewall.h) sends their DNS, HTTP, HTTPS and other TCP here. It
//  - answers DNS only for names some profile of the asking sandbox allows (NXDOMAIN else);
//  - proxies HTTP (transparent on port 80, explicit on gateway:3128, CONNECT included) and
//    TLS (transparent on 443, decided on the SNI), and plain TCP to CIDR-allowed addresses;
//  - refuses names that resolve to loopback, private, link-local or its own addresses;
//  - for hosts a credential of the sandbox is bound to, terminates TLS with the node's CA,
//    checks Host against SNI, and swaps the credential's placeholder for its secret in the
//    credential's header, within the credential's rate limit;
//  - reports every decision (and every credential use) to the audit hook, never a secret.
// Sandboxes are told apart by source address, which the firewall keeps honest.
//
// Thread-safe. Connections run on their own threads, bounded in number.
#pragma once

#include <netinet/in.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "credentials/credential.h"
#include "credentials/egress_profile.h"
#include "network/firewall.h"

namespace space::gateway {

// What the gateway knows of one sandbox while it runs. Immutable once registered.
struct SandboxEgress {
  std::string sandbox_id;
  std::string team;
  std::vector<credentials::EgressProfile> profiles;
  struct Credential {
    credentials::CredentialSpec spec;
    std::string placeholder;
  };
  std::vector<Credential> credentials;
};

struct GatewayConfig {
  std::string ca_dir;                 // where the node's CA lives
  std::string upstream_dns;           // "ip:port"; default: the host's first nameserver
  std::string upstream_ca_file;       // extra trust for upstream TLS (tests); system store always
  std::string upstream_ca_pem;        // the same as PEM text (read before a privilege drop)
  // Listeners take base_port .. base_port+4 when free (ephemeral ports otherwise). Fixed ports
  // matter: conntrack keeps a flow's redirect target, so a restarted node must listen where
  // its predecessor did, or a sandbox flow that outlived it would be redirected into nothing.
  uint16_t base_port = 0;
  int max_connections = 1024;
  int idle_timeout_ms = 120000;
  // The CA as PEM text, for a worker that never runs as root (ca_dir unused then).
  std::string ca_cert_pem;
  std::string ca_key_pem;
};

struct GatewayHooks {
  // The secret of credential `name` of `team`, unsealed; called only to inject it.
  std::function<Result<std::string>(const std::string& team, const std::string& name)> secret;
  // One audit record: kind "egress" or "credential", an action, and details without secrets.
  std::function<void(const SandboxEgress& sandbox, const std::string& kind, const std::string& action,
                     nlohmann::json detail)>
      audit;
};

class CertAuthority;

class Gateway {
 public:
  // Binds the listeners on the gateway address (before any sandbox link carries it: the
  // sockets use IP_FREEBIND) and starts serving.
  static Result<std::unique_ptr<Gateway>> Start(const GatewayConfig& config, GatewayHooks hooks);
  // The same with a CA loaded beforehand (config.ca_dir unused): the gateway worker loads the
  // root-owned CA key, then drops privileges, then starts.
  static Result<std::unique_ptr<Gateway>> Start(const GatewayConfig& config, GatewayHooks hooks,
                                                std::unique_ptr<CertAuthority> ca);
  ~Gateway();
  void Stop();

  network::GatewayPorts ports() const;
  // PEM of the CA certificate sandboxes must trust.
  const std::string& ca_certificate_pem() const;

  void Register(in_addr address, std::shared_ptr<const SandboxEgress> sandbox);
  void Unregister(in_addr address);

  struct Impl;

 private:
  explicit Gateway(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<Impl> impl_;
};

}  // namespace space::gateway
