// Egress: the node's side of a sandbox's network. The gateway worker (DNS, HTTP/TLS proxying,
// credential injection), this node's firewall table and network slot (both the root broker's),
// and per sandbox with egress profiles its veth, its registration with the gateway and its
// resolver and CA trust. A sandbox without profiles gets none of this: loopback only.
//
// Owned by the Node (absent when egress is off); borrows what Deps names. Thread-safe.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "broker/broker_client.h"
#include "node/audit_log.h"
#include "node/credential_service.h"
#include "node/gateway_process.h"
#include "node/live_sandboxes.h"
#include "node/uid_slot_lease.h"
#include "store/sandbox.h"

namespace space::node {

class Egress {
 public:
  struct Config {
    std::string data_dir;         // the gateway's CA lives in <data_dir>/gateway
    std::string upstream_dns;     // "ip[:port]"; default resolv.conf
    std::string upstream_ca;      // extra CA file trusted for upstream TLS (tests)
    std::string upstream_ca_pem;  // the same, read while the node was root
  };
  struct Deps {
    broker::BrokerClient* broker = nullptr;
    CredentialService* credentials = nullptr;
    AuditLog* audit = nullptr;
    UidSlotLease* uid_slots = nullptr;
    const LiveSandboxes* live = nullptr;
  };

  // Takes a network slot, starts the gateway worker and installs the firewall.
  static Result<std::unique_ptr<Egress>> Start(const Config& config, const Deps& deps);
  ~Egress() { Stop(); }
  // Idempotent: the worker stops, the broker removes the slot's links and table.
  void Stop();

  // The profiles named, as they are now: a new sandbox's policy (store::Sandbox::egress).
  // invalid_argument naming a profile that does not exist.
  Result<nlohmann::json> ResolveProfiles(const std::string& team, const std::vector<std::string>& names);
  // Joins a booted sandbox to the gateway: veth, registration, resolver and CA trust.
  // `steps`, when given, gets the broker's share (egress.net_attach, ms).
  Status Attach(const store::Sandbox& rec, LiveSandbox* live, pid_t init_pid, nlohmann::json* steps = nullptr);

  // A vm sandbox's link, made before its VMM starts: the host tap (its descriptor goes to the
  // VMM, and the link goes with the last copy), the sandbox's address, its NIC's MAC.
  struct VmLink {
    UniqueFd tap;
    in_addr address{};
    std::string mac;
  };
  Result<VmLink> PrepareVmLink(int64_t uid_slot);
  // Joins a booted vm sandbox to the gateway: its guest configures the NIC as `link` says,
  // then registration, resolver and CA trust as for Attach.
  Status AttachVm(const store::Sandbox& rec, LiveSandbox* live, const VmLink& link);
  void Detach(LiveSandbox* live);
  // After a restart: veths of this node's prefix that no live sandbox holds go.
  void Reconcile();

 private:
  explicit Egress(const Deps& deps) : d_(deps) {}
  // The sandbox's stored profiles and held credentials, as the gateway enforces them.
  Result<std::shared_ptr<gateway::SandboxEgress>> PolicyFor(const store::Sandbox& rec);
  // Registers a sandbox whose link is up at `address` (the caller marked `live` as holding it);
  // its resolver and CA trust inside.
  Status Join(LiveSandbox* live, in_addr address, std::shared_ptr<gateway::SandboxEgress> policy);

  const Deps d_;
  int64_t net_slot_ = -1;          // the broker's network slot: firewall table and link prefix
  int64_t gateway_uid_slot_ = -1;  // a uid slot held for the gateway worker's uid
  std::unique_ptr<GatewayProcess> gateway_;
};

}  // namespace space::node
