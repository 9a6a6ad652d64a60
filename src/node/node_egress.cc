// Egress wiring: the node's gateway and firewall, and each sandbox's veth and registration.
// A sandbox created without egress profiles gets none of this: loopback only.
#include <arpa/inet.h>

#include "common/clock.h"
#include "common/log.h"
#include "credentials/egress_profile.h"
#include "credentials/secret_box.h"
#include "broker/broker_client.h"
#include "gateway/ipc.h"
#include "network/firewall.h"
#include "node/live.h"
#include "node/node.h"
#include "node/stored_credential.h"
#include "runtime/ns/userns.h"

namespace space::node {
namespace {

constexpr char kCaPath[] = "/etc/ssl/certs/space-gateway-ca.pem";
constexpr char kBundlePath[] = "/etc/ssl/certs/ca-certificates.crt";

}  // namespace

bool Node::HasEgress(const store::SandboxRecord& rec) {
  auto j = nlohmann::json::parse(rec.egress_json, nullptr, false);
  return j.is_array() && !j.empty();
}

nlohmann::json Node::EgressProfileNames(const std::string& egress_json) {
  auto j = nlohmann::json::parse(egress_json, nullptr, false);
  nlohmann::json names = nlohmann::json::array();
  if (!j.is_array()) return names;
  for (const auto& p : j) {
    if (p.is_string()) names.push_back(p);  // records written before profiles were copied
    if (p.is_object() && p.contains("name")) names.push_back(p["name"]);
  }
  return names;
}

Result<std::string> Node::SnapshotEgressProfiles(const std::string& team, const std::vector<std::string>& names) {
  nlohmann::json out = nlohmann::json::array();
  if (names.empty()) return out.dump();
  if (!gateway_) return InvalidArgument("egress is disabled on this node; create the sandbox without egress profiles");
  for (const auto& name : names) {
    auto rec = store_->GetEgressProfile(team, name);
    if (!rec.ok()) return InvalidArgument("egress profile " + name + " does not exist");
    auto spec = nlohmann::json::parse(rec->spec_json, nullptr, false);
    if (spec.is_object()) spec.erase("name");  // stored in the API's shape, name included
    ASSIGN_OR_RETURN(credentials::EgressProfile profile, credentials::ParseEgressProfile(name, spec));
    out.push_back(credentials::EgressProfileJson(profile));
  }
  return out.dump();
}

Status Node::StartEgress() {
  broker::BrokerClient* broker = config_.broker;
  if (!broker) return Unavailable("egress needs the root broker, which `space dev` and `space node` start");
  // The broker takes the network slot (host-wide lock): it names this node's firewall table
  // and link prefix. A restarted node usually gets its old one back (the lowest free), and
  // takes over whatever that prefix left.
  ASSIGN_OR_RETURN(net_slot_, broker->NetAcquire());
  gateway::GatewayConfig gc;
  gc.ca_dir = config_.data_dir + "/gateway";
  // Ports fixed per net slot (below the ephemeral range), so the node that holds slot N
  // always listens where slot N's firewall rules and lingering conntrack flows point.
  gc.base_port = static_cast<uint16_t>(20000 + net_slot_ * 8);
  gc.upstream_dns = config_.egress_upstream_dns;
  gc.upstream_ca_file = config_.egress_upstream_ca;
  gc.upstream_ca_pem = config_.egress_upstream_ca_pem;
  if (!gc.upstream_ca_pem.empty()) gc.upstream_ca_file.clear();
  // The gateway runs in an unprivileged worker process (gateway_process.h); it asks for a
  // secret only to inject it, and is answered only for credentials of registered sandboxes.
  GatewayProcessHooks hooks;
  hooks.secret = [this](const std::string& team, const std::string& name) -> Result<std::string> {
    ASSIGN_OR_RETURN(store::CredentialRecord rec, store_->GetCredential(team, name));
    return credentials::Open(*kek_, rec.sealed_secret, credentials::CredentialAad(team, name));
  };
  hooks.audit = [this](const std::string& team, const std::string& sandbox_id, const std::string& kind,
                       const std::string& action,
                       nlohmann::json detail) { Audit(team, sandbox_id, kind, action, std::move(detail)); };
  hooks.ports_changed = [broker](const network::GatewayPorts& ports) {
    if (Status st = broker->InstallFirewall(ports); !st.ok()) LogError("egress", st.ToString());
  };
  // Send buffers above wmem_max take CAP_NET_ADMIN, which only the broker has.
  hooks.socket_pair = [broker](UniqueFd* node_end, UniqueFd* worker_end) {
    return broker->SeqpacketPair(gateway::ipc::kSocketBufferBytes, node_end, worker_end);
  };
  // The worker's uid is the base of a uid slot of its own, taken from the top of the range
  // (sandboxes take the lowest free): no sandbox, other node's worker or host account has it.
  ASSIGN_OR_RETURN(gateway_uid_slot_, uid_slots_.Acquire(HostSlots::kMaxSlots - 1 - net_slot_));
  const uid_t worker_uid = HostSlots::UidBase(gateway_uid_slot_);
  // It starts as that uid, in a user namespace the broker maps to it alone: never as root.
  hooks.map_ids = [worker_uid](int pidfd, pid_t pid) {
    return runtime::ns::MapIds({.pidfd = pidfd, .pid = pid, .uid_base = worker_uid, .shape = runtime::ns::IdMapShape::kOneId});
  };
  ASSIGN_OR_RETURN(gateway_, GatewayProcess::Start(gc, std::move(hooks), worker_uid));
  RETURN_IF_ERROR(broker->InstallFirewall(gateway_->ports()));
  return broker->NetReconcile({});  // links of this prefix belong to no live sandbox yet
}

void Node::StopEgress() {
  if (gateway_) gateway_->Stop();
  if (net_slot_ >= 0) {
    // The broker removes this slot's links and table, and gives the slot up.
    if (Status st = config_.broker->NetRelease(); !st.ok()) LogWarn("egress", st.ToString());
  }
  net_slot_ = -1;
  if (gateway_uid_slot_ >= 0) uid_slots_.Release(gateway_uid_slot_);
  gateway_uid_slot_ = -1;
}

void Node::ReconcileEgress() {
  std::vector<int64_t> keep;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [id, l] : live_) {
      if (l->egress) keep.push_back(l->uid_slot);
    }
  }
  if (Status st = config_.broker->NetReconcile(keep); !st.ok()) LogWarn("egress", st.ToString());
}

Status Node::AttachEgress(const store::SandboxRecord& rec, Live* live, pid_t init_pid, nlohmann::json* steps) {
  if (!gateway_) return Unavailable("sandbox " + rec.id + " has egress profiles but egress is disabled on this node");
  auto sandbox = std::make_shared<gateway::SandboxEgress>();
  sandbox->sandbox_id = rec.id;
  sandbox->team = rec.team;
  auto profiles = nlohmann::json::parse(rec.egress_json, nullptr, false);
  for (const auto& p : profiles) {
    if (!p.is_object()) return Internal("sandbox " + rec.id + ": stored egress profiles are corrupt");
    ASSIGN_OR_RETURN(credentials::EgressProfile profile,
                     credentials::ParseEgressProfile(p.value("name", std::string()), nlohmann::json{{"allow", p["allow"]}}));
    sandbox->profiles.push_back(std::move(profile));
  }
  ASSIGN_OR_RETURN(auto creds, store_->ListSandboxCredentials(rec.id));
  for (const auto& c : creds) {
    auto stored = store_->GetCredential(rec.team, c.name);
    if (!stored.ok()) continue;  // deleted since: its placeholder stays inert
    ASSIGN_OR_RETURN(credentials::CredentialSpec spec, CredentialSpecFromStored(c.name, stored->spec_json));
    sandbox->credentials.push_back({std::move(spec), c.placeholder});
  }
  const int64_t attach_start = MonoNowNs();
  ASSIGN_OR_RETURN(in_addr address, config_.broker->NetAttach(live->uid_slot, init_pid));
  if (steps) (*steps)["egress.net_attach"] = static_cast<double>(MonoNowNs() - attach_start) / 1e6;
  live->egress = true;
  live->egress_address = address;
  gateway_->Register(address, sandbox);

  // Inside: the resolver is the gateway, and the gateway's CA is trusted (certificate only).
  // Written by the sandbox's own guest, so nothing on the host follows a sandbox's symlink.
  RETURN_IF_ERROR(LiveWriteFile(live, "/etc/resolv.conf", 0644, "nameserver 100.64.0.1\n").status());
  const std::string& ca = gateway_->ca_certificate_pem();
  RETURN_IF_ERROR(LiveWriteFile(live, kCaPath, 0644, ca).status());
  std::string bundle;
  if (auto b = LiveReadFile(live, kBundlePath); b.ok()) bundle = std::move(*b);
  if (bundle.find(ca) == std::string::npos) {
    if (!bundle.empty() && bundle.back() != '\n') bundle += '\n';
    RETURN_IF_ERROR(LiveWriteFile(live, kBundlePath, 0644, bundle + ca).status());
  }
  return Status::Ok();
}

void Node::DetachEgress(Live* live) {
  if (!live->egress) return;
  if (gateway_) gateway_->Unregister(live->egress_address);
  if (net_slot_ >= 0) {
    if (Status st = config_.broker->NetDetach(live->uid_slot); !st.ok()) LogWarn("egress", st.ToString());
  }
  live->egress = false;
}

}  // namespace space::node
