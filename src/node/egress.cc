#include "node/egress.h"

#include "common/clock.h"
#include "common/host_slots.h"
#include "common/log.h"
#include "common/random.h"
#include "credentials/egress_profile.h"
#include "gateway/ipc.h"
#include "network/firewall.h"
#include "network/netlink.h"
#include "node/guest_files.h"
#include "node/guest_net.h"
#include "runtime/ns/userns.h"

namespace space::node {
namespace {

constexpr char kCaPath[] = "/etc/ssl/certs/space-gateway-ca.pem";
constexpr char kBundlePath[] = "/etc/ssl/certs/ca-certificates.crt";

}  // namespace

Result<std::unique_ptr<Egress>> Egress::Start(const Config& config, const Deps& deps) {
  broker::BrokerClient* broker = deps.broker;
  if (!broker) return Unavailable("egress needs the root broker, which `space dev` and `space node` start");
  std::unique_ptr<Egress> egress(new Egress(deps));
  // The broker takes the network slot (host-wide lock): it names this node's firewall table
  // and link prefix. A restarted node usually gets its old one back (the lowest free), and
  // takes over whatever that prefix left.
  ASSIGN_OR_RETURN(egress->net_slot_, broker->NetAcquire());
  gateway::GatewayConfig gc;
  gc.ca_dir = config.data_dir + "/gateway";
  // Ports fixed per net slot (below the ephemeral range), so the node that holds slot N
  // always listens where slot N's firewall rules and lingering conntrack flows point.
  gc.base_port = static_cast<uint16_t>(20000 + egress->net_slot_ * 8);
  gc.upstream_dns = config.upstream_dns;
  gc.upstream_ca_file = config.upstream_ca;
  gc.upstream_ca_pem = config.upstream_ca_pem;
  if (!gc.upstream_ca_pem.empty()) gc.upstream_ca_file.clear();
  // The gateway runs in an unprivileged worker process (gateway_process.h); it asks for a
  // secret only to inject it, and is answered only for credentials of registered sandboxes.
  GatewayProcessHooks hooks;
  hooks.secret = [creds = deps.credentials](const std::string& team, const std::string& name) {
    return creds->Unseal(team, name);
  };
  hooks.audit = [audit = deps.audit](const std::string& team, const std::string& sandbox_id, const std::string& kind,
                                     const std::string& action, const nlohmann::json& detail) {
    audit->Record(team, sandbox_id, kind, action, detail);
  };
  hooks.ports_changed = [broker](const network::GatewayPorts& ports) {
    if (Status st = broker->InstallFirewall(ports); !st.ok()) LogError("egress", st.ToString());
  };
  // Send buffers above wmem_max take CAP_NET_ADMIN, which only the broker has.
  hooks.socket_pair = [broker](UniqueFd* node_end, UniqueFd* worker_end) {
    return broker->SeqpacketPair(gateway::ipc::kSocketBufferBytes, node_end, worker_end);
  };
  // The worker's uid is the base of a uid slot of its own, taken from the top of the range
  // (sandboxes take the lowest free): no sandbox, other node's worker or host account has it.
  ASSIGN_OR_RETURN(egress->gateway_uid_slot_, deps.uid_slots->Acquire(HostSlots::kMaxSlots - 1 - egress->net_slot_));
  const uid_t worker_uid = HostSlots::UidBase(egress->gateway_uid_slot_);
  // It starts as that uid, in a user namespace the broker maps to it alone: never as root.
  hooks.map_ids = [worker_uid, broker](int pidfd, pid_t pid) {
    return runtime::ns::MapIds(broker,
                               {.pidfd = pidfd, .pid = pid, .uid_base = worker_uid, .shape = IdMapShape::kOneId});
  };
  hooks.privileged = broker;
  ASSIGN_OR_RETURN(egress->gateway_, GatewayProcess::Start(gc, std::move(hooks), worker_uid));
  RETURN_IF_ERROR(broker->InstallFirewall(egress->gateway_->ports()));
  RETURN_IF_ERROR(broker->NetReconcile({}));  // links of this prefix belong to no live sandbox yet
  return egress;
}

void Egress::Stop() {
  if (gateway_) gateway_->Stop();
  if (net_slot_ >= 0) {
    // The broker removes this slot's links and table, and gives the slot up.
    if (Status st = d_.broker->NetRelease(); !st.ok()) LogWarn("egress", st.ToString());
  }
  net_slot_ = -1;
  if (gateway_uid_slot_ >= 0) d_.uid_slots->Release(gateway_uid_slot_);
  gateway_uid_slot_ = -1;
}

Result<nlohmann::json> Egress::ResolveProfiles(const std::string& team, const std::vector<std::string>& names) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& name : names) {
    auto profile = d_.credentials->GetProfile(team, name);
    if (profile.status().code() == StatusCode::kNotFound) {
      return InvalidArgument("egress profile " + name + " does not exist");
    }
    RETURN_IF_ERROR(profile.status());
    out.push_back(credentials::EgressProfileJson(*profile));
  }
  return out;
}

void Egress::Reconcile() {
  std::vector<int64_t> keep;
  for (const auto& l : d_.live->All()) {
    if (l->egress) keep.push_back(l->uid_slot);
  }
  if (Status st = d_.broker->NetReconcile(keep); !st.ok()) LogWarn("egress", st.ToString());
}

Result<std::shared_ptr<gateway::SandboxEgress>> Egress::PolicyFor(const store::Sandbox& rec) {
  if (!gateway_) return Unavailable("sandbox " + rec.id + " has egress profiles but egress is disabled on this node");
  auto sandbox = std::make_shared<gateway::SandboxEgress>();
  sandbox->sandbox_id = rec.id;
  sandbox->team = rec.team;
  for (const auto& p : rec.egress) {
    if (!p.is_object() || !p.contains("allow"))
      return Internal("sandbox " + rec.id + ": stored egress profiles are corrupt");
    ASSIGN_OR_RETURN(
        credentials::EgressProfile profile,
        credentials::ParseEgressProfile(p.value("name", std::string()), nlohmann::json{{"allow", p["allow"]}}));
    sandbox->profiles.push_back(std::move(profile));
  }
  ASSIGN_OR_RETURN(auto held, d_.credentials->HeldBy(rec.team, rec.id));
  for (auto& h : held) sandbox->credentials.push_back({std::move(h.spec), std::move(h.placeholder)});
  return sandbox;
}

Status Egress::Attach(const store::Sandbox& rec, LiveSandbox* live, pid_t init_pid, nlohmann::json* steps) {
  ASSIGN_OR_RETURN(auto policy, PolicyFor(rec));
  const int64_t attach_start = MonoNowNs();
  ASSIGN_OR_RETURN(in_addr address, d_.broker->NetAttach(live->uid_slot, init_pid));
  if (steps) (*steps)["egress.net_attach"] = static_cast<double>(MonoNowNs() - attach_start) / 1e6;
  // Marked as soon as the link exists: a failure from here on leaves it for Detach to remove.
  live->egress = true;
  live->egress_address = address;
  return Join(live, address, std::move(policy));
}

Result<Egress::VmLink> Egress::PrepareVmLink(int64_t uid_slot) {
  if (!gateway_) return Unavailable("egress is disabled on this node");
  VmLink link;
  ASSIGN_OR_RETURN(link.address, d_.broker->NetTap(uid_slot, &link.tap));
  link.mac = RandomGuestMac();  // fresh for every boot, fork and restore
  return link;
}

Status Egress::AttachVm(const store::Sandbox& rec, LiveSandbox* live, const VmLink& link) {
  ASSIGN_OR_RETURN(auto policy, PolicyFor(rec));
  ASSIGN_OR_RETURN(in_addr gateway, network::ParseIpv4(network::kGatewayAddress));
  // As for Attach (the tap exists since PrepareVmLink).
  live->egress = true;
  live->egress_address = link.address;
  RETURN_IF_ERROR(GuestConfigureNetwork(live, link.address, gateway, link.mac));
  return Join(live, link.address, std::move(policy));
}

Status Egress::Join(LiveSandbox* live, in_addr address, std::shared_ptr<gateway::SandboxEgress> policy) {
  gateway_->Register(address, std::move(policy));

  // Inside: the resolver is the gateway, and the gateway's CA is trusted (certificate only).
  // Written by the sandbox's own guest, so nothing on the host follows a sandbox's symlink.
  RETURN_IF_ERROR(GuestWriteFile(live, "/etc/resolv.conf", 0644, "nameserver 100.64.0.1\n"));
  const std::string& ca = gateway_->ca_certificate_pem();
  RETURN_IF_ERROR(GuestWriteFile(live, kCaPath, 0644, ca));
  std::string bundle;
  if (auto b = GuestReadFile(live, kBundlePath); b.ok()) bundle = std::move(*b);
  if (bundle.find(ca) == std::string::npos) {
    if (!bundle.empty() && bundle.back() != '\n') bundle += '\n';
    RETURN_IF_ERROR(GuestWriteFile(live, kBundlePath, 0644, bundle + ca));
  }
  return Status::Ok();
}

void Egress::Detach(LiveSandbox* live) {
  if (!live->egress) return;
  if (gateway_) gateway_->Unregister(live->egress_address);
  if (net_slot_ >= 0) {
    if (Status st = d_.broker->NetDetach(live->uid_slot); !st.ok()) LogWarn("egress", st.ToString());
  }
  live->egress = false;
}

}  // namespace space::node
