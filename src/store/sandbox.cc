#include "store/sandbox.h"

#include <array>
#include <utility>

#include "store/json_columns.h"
#include "store/store.h"

namespace space::store {
namespace {

constexpr std::array<std::pair<SandboxState, std::string_view>, 9> kStateNames = {{
    {SandboxState::kCreating, "creating"},
    {SandboxState::kRunning, "running"},
    {SandboxState::kPaused, "paused"},
    {SandboxState::kSuspending, "suspending"},
    {SandboxState::kSuspended, "suspended"},
    {SandboxState::kResuming, "resuming"},
    {SandboxState::kDestroying, "destroying"},
    {SandboxState::kDestroyed, "destroyed"},
    {SandboxState::kFailed, "failed"},
}};

template <typename T>
T NumberOr(const nlohmann::json& j, const char* key, T fallback) {
  if (!j.is_object()) return fallback;
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return fallback;
  return it->get<T>();
}

}  // namespace

std::string_view StateName(SandboxState state) {
  for (const auto& [s, name] : kStateNames) {
    if (s == state) return name;
  }
  return "failed";
}

Result<SandboxState> ParseSandboxState(std::string_view name) {
  for (const auto& [s, n] : kStateNames) {
    if (n == name) return s;
  }
  return InvalidArgument("unknown sandbox state '" + std::string(name) + "'");
}

bool IsEnded(SandboxState state) { return state == SandboxState::kDestroyed || state == SandboxState::kFailed; }

std::string_view RuntimeName(RuntimeKind kind) { return kind == RuntimeKind::kVm ? "vm" : "ns"; }

Result<RuntimeKind> ParseRuntimeKind(std::string_view name) {
  if (name == "ns") return RuntimeKind::kNs;
  if (name == "vm") return RuntimeKind::kVm;
  return InvalidArgument("unknown runtime '" + std::string(name) + "': ns or vm");
}

std::string_view OnTimeoutName(OnTimeout action) { return action == OnTimeout::kSuspend ? "suspend" : "destroy"; }

Result<OnTimeout> ParseOnTimeout(std::string_view name) {
  if (name == "destroy") return OnTimeout::kDestroy;
  if (name == "suspend") return OnTimeout::kSuspend;
  return InvalidArgument("unknown on_timeout '" + std::string(name) + "': destroy or suspend");
}

nlohmann::json Resources::ToJson() const { return {{"cpus", cpus}, {"memory_mb", memory_mb}, {"disk_mb", disk_mb}}; }

Resources Resources::FromJson(const nlohmann::json& j) {
  Resources r;
  r.cpus = NumberOr(j, "cpus", r.cpus);
  r.memory_mb = NumberOr(j, "memory_mb", r.memory_mb);
  r.disk_mb = NumberOr(j, "disk_mb", r.disk_mb);
  return r;
}

nlohmann::json SnapshotPolicy::ToJson() const {
  if (!enabled()) return nlohmann::json::object();
  return {{"every_s", every_s}, {"keep", keep}, {"max_age_s", max_age_s}};
}

SnapshotPolicy SnapshotPolicy::FromJson(const nlohmann::json& j) {
  SnapshotPolicy p;
  p.every_s = NumberOr(j, "every_s", p.every_s);
  p.keep = NumberOr(j, "keep", p.keep);
  p.max_age_s = NumberOr(j, "max_age_s", p.max_age_s);
  if (p.every_s < 0) p.every_s = 0;
  return p;
}

std::vector<std::string> Sandbox::EgressProfileNames() const {
  std::vector<std::string> names;
  if (!egress.is_array()) return names;
  for (const auto& p : egress) {
    if (p.is_string()) names.push_back(p.get<std::string>());  // a bare name: rows from before profiles were copied
    if (p.is_object() && p.contains("name") && p["name"].is_string()) names.push_back(p["name"].get<std::string>());
  }
  return names;
}

Sandbox Sandbox::FromRecord(const SandboxRecord& rec) {
  Sandbox s;
  s.id = rec.id;
  s.team = rec.team;
  if (auto state = ParseSandboxState(rec.state); state.ok()) {
    s.state = *state;
  } else {
    s.state = SandboxState::kFailed;
    s.error = state.status().message();
  }
  s.template_name = rec.template_name;
  s.template_digest = rec.template_digest;
  // Rows written before the vm runtime existed have no runtime: they are ns.
  if (auto kind = ParseRuntimeKind(rec.runtime); kind.ok()) s.runtime = *kind;
  s.node = rec.node;
  s.created_at_ms = rec.created_at_ms;
  s.expires_at_ms = rec.expires_at_ms;
  s.timeout_s = rec.timeout_s;
  if (auto action = ParseOnTimeout(rec.on_timeout); action.ok()) s.on_timeout = *action;
  s.metadata = ParseStringMap(rec.metadata_json);
  s.env = ParseStringMap(rec.env_json);
  s.egress = ParseArray(rec.egress_json);
  s.resources = Resources::FromJson(ParseObject(rec.resources_json));
  s.timings = ParseObject(rec.timings_json);
  s.uid_slot = rec.uid_slot;
  if (s.error.empty()) s.error = rec.error;
  s.head_snapshot = rec.head_snapshot;
  s.policy = SnapshotPolicy::FromJson(ParseObject(rec.policy_json));
  return s;
}

SandboxRecord Sandbox::ToRecord() const {
  SandboxRecord r;
  r.id = id;
  r.team = team;
  r.state = std::string(StateName(state));
  r.template_name = template_name;
  r.template_digest = template_digest;
  r.runtime = std::string(RuntimeName(runtime));
  r.node = node;
  r.created_at_ms = created_at_ms;
  r.expires_at_ms = expires_at_ms;
  r.timeout_s = timeout_s;
  r.on_timeout = std::string(OnTimeoutName(on_timeout));
  r.metadata_json = nlohmann::json(metadata).dump();
  r.env_json = nlohmann::json(env).dump();
  r.egress_json = egress.dump();
  r.resources_json = resources.ToJson().dump();
  r.timings_json = timings.dump();
  r.uid_slot = uid_slot;
  r.error = error;
  r.head_snapshot = head_snapshot;
  r.policy_json = policy.ToJson().dump();
  return r;
}

}  // namespace space::store
