#include "broker/protocol.h"

#include <sys/socket.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <set>

#include "common/host_slots.h"
#include "common/ids.h"
#include "common/syscall.h"

namespace space::broker {
namespace {

struct OpInfo {
  Op op;
  const char* name;
  size_t fds;
  std::set<std::string> fields;  // besides "op"
};

const std::vector<OpInfo>& Ops() {
  static const std::vector<OpInfo> ops = {
      {Op::kHello, "hello", 0, {}},
      {Op::kNetAcquire, "net_acquire", 0, {}},
      {Op::kFirewallInstall, "firewall_install", 0, {"ports"}},
      {Op::kNetAttach, "net_attach", 1, {"uid_slot"}},
      {Op::kNetDetach, "net_detach", 0, {"uid_slot"}},
      {Op::kNetTap, "net_tap", 0, {"uid_slot"}},
      {Op::kNetReconcile, "net_reconcile", 0, {"keep"}},
      {Op::kNetRelease, "net_release", 0, {}},
      {Op::kSeqpacketPair, "seqpacket_pair", 0, {"send_buffer_bytes"}},
      {Op::kCgroupCreate, "cgroup_create", 0, {"runtime", "id", "limits"}},
      {Op::kCgroupUpdate, "cgroup_update", 0, {"runtime", "id", "limits"}},
      {Op::kCgroupAttach, "cgroup_attach", 1, {"runtime", "id"}},
      {Op::kCgroupFreeze, "cgroup_freeze", 0, {"runtime", "id", "frozen"}},
      {Op::kCgroupKill, "cgroup_kill", 0, {"runtime", "id"}},
      {Op::kCgroupRemove, "cgroup_remove", 0, {"runtime", "id"}},
      {Op::kKillChild, "kill_child", 1, {}},
      {Op::kUsernsMap, "userns_map", 1, {"uid_slot", "shape", "kvm_gid"}},
      {Op::kUidAcquire, "uid_acquire", 0, {"preferred"}},
      {Op::kUidRelease, "uid_release", 0, {"uid_slot"}},
      {Op::kIdmapTree, "idmap_tree", 2, {"uid_slot", "read_only"}},
      {Op::kSubvolDelete, "subvol_delete", 1, {"name"}},
      {Op::kQgroupLimit, "qgroup_limit", 1, {"bytes"}},
      {Op::kQuotaRescan, "quota_rescan", 0, {}},
      {Op::kChildNice, "child_nice", 1, {"nice"}},
      {Op::kNodeThreadNice, "node_thread_nice", 0, {"tid", "nice"}},
      {Op::kSubvolSnapshot, "subvol_snapshot", 2, {"name", "read_only"}},
      {Op::kCgroupParents, "cgroup_parents", 0, {"runtime", "present"}},
      {Op::kSubvolCreate, "subvol_create", 1, {"name"}},
      {Op::kVmStateDir, "vm_state_dir", 1, {}},
      {Op::kImportOpen, "import_open", 0, {"source"}},
  };
  return ops;
}

const OpInfo& Info(Op op) {
  for (const auto& i : Ops()) {
    if (i.op == op) return i;
  }
  return Ops().front();
}

Result<int64_t> IntField(const nlohmann::json& j, const char* name, int64_t lo, int64_t hi) {
  const auto& v = j.at(name);
  if (!v.is_number_integer()) return InvalidArgument(std::string("broker: ") + name + " must be an integer");
  int64_t n = v.get<int64_t>();
  if (n < lo || n > hi) {
    return InvalidArgument(std::string("broker: ") + name + " " + std::to_string(n) + " is outside " +
                           std::to_string(lo) + ".." + std::to_string(hi));
  }
  return n;
}

// Gateway ports: unprivileged (the gateway never binds below 1024) and pairwise distinct, so
// no rule redirects one service to another's listener.
Result<network::GatewayPorts> PortsFromJson(const nlohmann::json& j) {
  static const char* kNames[] = {"dns", "http", "tls", "proxy", "tcp"};
  if (!j.is_object() || j.size() != std::size(kNames)) {
    return InvalidArgument("broker: ports must be an object with dns, http, tls, proxy and tcp");
  }
  network::GatewayPorts p;
  uint16_t* slots[] = {&p.dns, &p.http, &p.tls, &p.proxy, &p.tcp};
  std::set<int64_t> seen;
  for (size_t i = 0; i < std::size(kNames); ++i) {
    if (!j.contains(kNames[i])) return InvalidArgument(std::string("broker: ports.") + kNames[i] + " is missing");
    ASSIGN_OR_RETURN(int64_t v, IntField(j, kNames[i], 1024, 65535));
    if (!seen.insert(v).second) return InvalidArgument("broker: gateway ports must be distinct");
    *slots[i] = static_cast<uint16_t>(v);
  }
  return p;
}

Result<CgroupRuntime> RuntimeFromJson(const nlohmann::json& v) {
  if (v == "ns") return CgroupRuntime::kNs;
  if (v == "vm") return CgroupRuntime::kVm;
  return InvalidArgument("broker: runtime must be \"ns\" or \"vm\"");
}

Result<std::string> SandboxIdFromJson(const nlohmann::json& v) {
  if (!v.is_string()) return InvalidArgument("broker: id must be a string");
  std::string id = v.get<std::string>();
  RETURN_IF_ERROR(ValidateSandboxId(id).Annotate("broker"));  // the runtimes' ids
  return id;
}

Result<uint64_t> UnsignedField(const nlohmann::json& j, const char* name, uint64_t lo, uint64_t hi) {
  const auto& v = j.at(name);
  if (!v.is_number_unsigned()) return InvalidArgument(std::string("broker: limits.") + name + " must be a whole number");
  uint64_t n = v.get<uint64_t>();
  if (n < lo || n > hi) return InvalidArgument(std::string("broker: limits.") + name + " is out of range");
  return n;
}

Result<runtime::Limits> LimitsFromJson(const nlohmann::json& j) {
  if (!j.is_object() || j.size() != 3 || !j.contains("cpus") || !j.contains("memory_bytes") ||
      !j.contains("pids_max")) {
    return InvalidArgument("broker: limits must be an object with cpus, memory_bytes and pids_max");
  }
  runtime::Limits l;
  const auto& cpus = j["cpus"];
  if (!cpus.is_number() || !std::isfinite(cpus.get<double>()) || cpus.get<double>() <= 0 ||
      cpus.get<double>() > kMaxCpus) {
    return InvalidArgument("broker: limits.cpus is out of range");
  }
  l.cpus = cpus.get<double>();
  ASSIGN_OR_RETURN(l.memory_bytes, UnsignedField(j, "memory_bytes", kMinMemoryBytes, kMaxMemoryBytes));
  ASSIGN_OR_RETURN(l.pids_max, UnsignedField(j, "pids_max", 1, kMaxPids));
  return l;
}

}  // namespace

std::string_view OpName(Op op) { return Info(op).name; }

size_t FdsFor(Op op) { return Info(op).fds; }

std::string EncodeRequest(const Request& r) {
  nlohmann::json j = {{"op", OpName(r.op)}};
  switch (r.op) {
    case Op::kFirewallInstall:
      j["ports"] = {{"dns", r.ports.dns}, {"http", r.ports.http}, {"tls", r.ports.tls},
                    {"proxy", r.ports.proxy}, {"tcp", r.ports.tcp}};
      break;
    case Op::kNetAttach:
    case Op::kNetTap:
    case Op::kNetDetach:
    case Op::kUidRelease:
    case Op::kIdmapTree:
      if (r.op == Op::kIdmapTree) j["read_only"] = r.read_only;
      j["uid_slot"] = r.uid_slot;
      break;
    case Op::kUidAcquire:
      j["preferred"] = r.preferred;
      break;
    case Op::kSubvolSnapshot:
      j["read_only"] = r.read_only;
      [[fallthrough]];
    case Op::kSubvolDelete:
    case Op::kSubvolCreate:
      j["name"] = r.name;
      break;
    case Op::kQgroupLimit:
      j["bytes"] = r.bytes;
      break;
    case Op::kImportOpen:
      j["source"] = r.source;
      break;
    case Op::kNodeThreadNice:
      j["tid"] = r.tid;
      [[fallthrough]];
    case Op::kChildNice:
      j["nice"] = r.nice;
      break;
    case Op::kNetReconcile:
      j["keep"] = r.keep;
      break;
    case Op::kUsernsMap:
      j["uid_slot"] = r.uid_slot;
      j["shape"] = r.shape == runtime::ns::IdMapShape::kOneId ? "one_id" : "sandbox";
      j["kvm_gid"] = r.kvm_gid;
      break;
    case Op::kSeqpacketPair:
      j["send_buffer_bytes"] = r.send_buffer_bytes;
      break;
    case Op::kCgroupCreate:
    case Op::kCgroupUpdate:
      j["limits"] = {{"cpus", r.limits.cpus}, {"memory_bytes", r.limits.memory_bytes}, {"pids_max", r.limits.pids_max}};
      [[fallthrough]];
    case Op::kCgroupAttach:
    case Op::kCgroupKill:
    case Op::kCgroupRemove:
      j["id"] = r.id;
      j["runtime"] = r.runtime == CgroupRuntime::kVm ? "vm" : "ns";
      break;
    case Op::kCgroupFreeze:
      j["runtime"] = r.runtime == CgroupRuntime::kVm ? "vm" : "ns";
      j["id"] = r.id;
      j["frozen"] = r.frozen;
      break;
    case Op::kCgroupParents:
      j["runtime"] = r.runtime == CgroupRuntime::kVm ? "vm" : "ns";
      j["present"] = r.present;
      break;
    default:
      break;
  }
  return j.dump();
}

Result<Request> DecodeRequest(std::string_view bytes, size_t fd_count) {
  if (bytes.size() > kMaxMessageBytes) return InvalidArgument("broker: request exceeds 128 KiB");
  // Depth-limited by its shape: a request is flat except ports (an object) and keep (an array).
  auto j = nlohmann::json::parse(bytes, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return InvalidArgument("broker: request is not a JSON object");
  if (!j.contains("op") || !j["op"].is_string()) return InvalidArgument("broker: request has no op");
  const std::string name = j["op"].get<std::string>();
  const OpInfo* info = nullptr;
  for (const auto& i : Ops()) {
    if (name == i.name) info = &i;
  }
  if (!info) return InvalidArgument("broker: unknown op");
  for (const auto& [key, value] : j.items()) {
    if (key != "op" && !info->fields.count(key)) return InvalidArgument("broker: " + name + " takes no field " + key);
  }
  for (const auto& f : info->fields) {
    if (!j.contains(f)) return InvalidArgument("broker: " + name + " needs " + f);
  }
  if (fd_count != info->fds) {
    return InvalidArgument("broker: " + name + " takes " + std::to_string(info->fds) + " descriptors, got " +
                           std::to_string(fd_count));
  }
  Request r;
  r.op = info->op;
  switch (r.op) {
    case Op::kFirewallInstall: {
      ASSIGN_OR_RETURN(r.ports, PortsFromJson(j["ports"]));
      break;
    }
    case Op::kNetAttach:
    case Op::kNetTap:
    case Op::kNetDetach:
    case Op::kUidRelease:
    case Op::kIdmapTree: {
      ASSIGN_OR_RETURN(r.uid_slot, IntField(j, "uid_slot", 0, HostSlots::kMaxSlots - 1));
      if (r.op == Op::kIdmapTree) {
        if (!j["read_only"].is_boolean()) return InvalidArgument("broker: read_only must be true or false");
        r.read_only = j["read_only"].get<bool>();
      }
      break;
    }
    case Op::kUidAcquire: {
      ASSIGN_OR_RETURN(r.preferred, IntField(j, "preferred", -1, HostSlots::kMaxSlots - 1));
      break;
    }
    case Op::kSubvolSnapshot:
    case Op::kSubvolDelete:
    case Op::kSubvolCreate: {
      if (r.op == Op::kSubvolSnapshot) {
        if (!j["read_only"].is_boolean()) return InvalidArgument("broker: read_only must be true or false");
        r.read_only = j["read_only"].get<bool>();
      }
      const auto& n = j["name"];
      if (!n.is_string()) return InvalidArgument("broker: name must be a string");
      r.name = n.get<std::string>();
      const bool safe = std::all_of(r.name.begin(), r.name.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-';
      });
      if (r.name.empty() || r.name.size() > kMaxSubvolNameLen || !safe || r.name == "." || r.name == "..") {
        return InvalidArgument("broker: name must be one path component of [A-Za-z0-9_.-], at most 128 characters");
      }
      break;
    }
    case Op::kQgroupLimit: {
      ASSIGN_OR_RETURN(r.bytes, IntField(j, "bytes", 1, kMaxQgroupLimitBytes));
      break;
    }
    case Op::kImportOpen: {
      const auto& src = j["source"];
      if (!src.is_string()) return InvalidArgument("broker: source must be a string");
      r.source = src.get<std::string>();
      if (r.source.empty() || r.source[0] != '/' || r.source.size() > kMaxImportSourceLen ||
          r.source.find('\0') != std::string::npos) {
        return InvalidArgument("broker: source must be an absolute path of at most 4096 bytes");
      }
      break;
    }
    case Op::kNodeThreadNice:
    case Op::kChildNice: {
      if (r.op == Op::kNodeThreadNice) {
        ASSIGN_OR_RETURN(r.tid, IntField(j, "tid", 1, kMaxTid));
      }
      ASSIGN_OR_RETURN(r.nice, IntField(j, "nice", 0, kMaxNice));
      break;
    }
    case Op::kUsernsMap: {
      ASSIGN_OR_RETURN(r.uid_slot, IntField(j, "uid_slot", 0, HostSlots::kMaxSlots - 1));
      if (j["shape"] == "sandbox") {
        r.shape = runtime::ns::IdMapShape::kSandbox;
      } else if (j["shape"] == "one_id") {
        r.shape = runtime::ns::IdMapShape::kOneId;
      } else {
        return InvalidArgument("broker: shape must be \"sandbox\" or \"one_id\"");
      }
      // Host gids below the first slot are the host's own; 0 means none. Whether it is the
      // group of /dev/kvm the broker checks when it acts.
      ASSIGN_OR_RETURN(r.kvm_gid, IntField(j, "kvm_gid", 0, HostSlots::UidBase(0) - 1));
      if (r.kvm_gid != 0 && r.shape != runtime::ns::IdMapShape::kOneId) {
        return InvalidArgument("broker: only a one_id map may add the kvm group");
      }
      break;
    }
    case Op::kNetReconcile: {
      const auto& keep = j["keep"];
      if (!keep.is_array() || keep.size() > static_cast<size_t>(HostSlots::kMaxSlots)) {
        return InvalidArgument("broker: keep must be an array of at most 16384 uid slots");
      }
      for (const auto& k : keep) {
        if (!k.is_number_integer() || k.get<int64_t>() < 0 || k.get<int64_t>() >= HostSlots::kMaxSlots) {
          return InvalidArgument("broker: keep holds something other than a uid slot");
        }
        r.keep.push_back(k.get<int64_t>());
      }
      break;
    }
    case Op::kSeqpacketPair: {
      ASSIGN_OR_RETURN(r.send_buffer_bytes, IntField(j, "send_buffer_bytes", 4096, kMaxSendBufferBytes));
      break;
    }
    case Op::kHello:
    case Op::kNetAcquire:
    case Op::kNetRelease:
    case Op::kKillChild:
    case Op::kQuotaRescan:
    case Op::kVmStateDir:
      break;
    case Op::kCgroupParents: {
      ASSIGN_OR_RETURN(r.runtime, RuntimeFromJson(j["runtime"]));
      if (!j["present"].is_boolean()) return InvalidArgument("broker: present must be true or false");
      r.present = j["present"].get<bool>();
      break;
    }
    case Op::kCgroupCreate:
    case Op::kCgroupUpdate:
    case Op::kCgroupAttach:
    case Op::kCgroupFreeze:
    case Op::kCgroupKill:
    case Op::kCgroupRemove: {
      ASSIGN_OR_RETURN(r.runtime, RuntimeFromJson(j["runtime"]));
      ASSIGN_OR_RETURN(r.id, SandboxIdFromJson(j["id"]));
      if (r.op == Op::kCgroupCreate || r.op == Op::kCgroupUpdate) {
        ASSIGN_OR_RETURN(r.limits, LimitsFromJson(j["limits"]));
      }
      if (r.op == Op::kCgroupFreeze) {
        if (!j["frozen"].is_boolean()) return InvalidArgument("broker: frozen must be true or false");
        r.frozen = j["frozen"].get<bool>();
      }
      break;
    }
  }
  return r;
}

std::string EncodeOk(nlohmann::json fields) {
  fields["ok"] = true;
  return fields.dump();
}

std::string EncodeError(const Status& status) {
  // Error messages may quote request bytes; replace what is not UTF-8 rather than throw.
  return nlohmann::json{{"ok", false}, {"code", StatusCodeWord(status.code())}, {"message", status.message()}}.dump(
      -1, ' ', false, nlohmann::json::error_handler_t::replace);
}

Result<nlohmann::json> DecodeReply(std::string_view bytes) {
  auto j = nlohmann::json::parse(bytes, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("ok") || !j["ok"].is_boolean()) {
    return Internal("root broker: malformed reply");
  }
  if (j["ok"].get<bool>()) return j;
  std::string word = j.value("code", std::string());
  std::string message = j.contains("message") && j["message"].is_string() ? j["message"].get<std::string>() : "";
  StatusCode code = StatusCode::kInternal;
  for (int c = static_cast<int>(StatusCode::kInvalidArgument); c <= static_cast<int>(StatusCode::kDeadlineExceeded);
       ++c) {
    if (StatusCodeWord(static_cast<StatusCode>(c)) == word) code = static_cast<StatusCode>(c);
  }
  return Status(code, "root broker: " + message);
}

Status SendDatagram(int socket, std::string_view bytes, const std::vector<int>& fds) {
  return space::SendDatagram(socket, bytes, fds, kChannelLimits);
}

Result<Datagram> ReceiveDatagram(int socket) { return space::ReceiveDatagram(socket, kChannelLimits); }

}  // namespace space::broker
