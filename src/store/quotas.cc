#include "store/quotas.h"

#include <cmath>

namespace space::store {
namespace {

constexpr const char* kFields[] = {"sandboxes", "cpus", "memory_mb", "disk_mb", "snapshots"};

std::string Number(double v) {
  if (v == std::floor(v)) return std::to_string(static_cast<int64_t>(v));
  std::string s = std::to_string(v);
  while (!s.empty() && s.back() == '0') s.pop_back();
  return s;
}

// The team's quotas, or an empty object when it has none.
Result<nlohmann::json> QuotasOf(Store* store, const std::string& team) {
  if (team == "default") return nlohmann::json::object();
  auto t = store->GetTeam(team);
  if (!t.ok()) {
    if (t.status().code() == StatusCode::kNotFound) return nlohmann::json::object();
    return t.status();
  }
  return t->quotas;
}

Status Over(const std::string& team, const char* field, double limit, double used, double adding) {
  return ResourceExhausted("team " + team + " is over its quota of " + Number(limit) + " " + field + ": " +
                           Number(used) + " in use, this needs " + Number(adding) + " more (quota '" + field + "')");
}

Status Check(const std::string& team, const nlohmann::json& q, const char* field, double used, double adding) {
  if (!q.contains(field) || !q[field].is_number()) return Status::Ok();
  const double limit = q[field].get<double>();
  if (used + adding > limit) return Over(team, field, limit, used, adding);
  return Status::Ok();
}

}  // namespace

nlohmann::json TeamUsage::ToJson() const {
  return {{"sandboxes", sandboxes},
          {"cpus", cpus},
          {"memory_mb", memory_mb},
          {"disk_mb", disk_mb},
          {"snapshots", snapshots}};
}

Result<nlohmann::json> ParseQuotas(const nlohmann::json& quotas) {
  if (!quotas.is_object()) return InvalidArgument("field 'quotas' must be an object");
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [k, v] : quotas.items()) {
    bool known = false;
    for (const char* f : kFields) known |= k == f;
    if (!known) {
      return InvalidArgument("unknown quota '" + k.substr(0, 32) +
                             "' (quotas: sandboxes, cpus, memory_mb, disk_mb, snapshots)");
    }
    if (v.is_null()) continue;
    if (!v.is_number() || v.get<double>() < 0 || v.get<double>() > 1e12) {
      return InvalidArgument("quota '" + k + "' must be a number from 0 to 10^12");
    }
    if (k != "cpus" && v.get<double>() != std::floor(v.get<double>())) {
      return InvalidArgument("quota '" + k + "' must be a whole number");
    }
    out[k] = k == "cpus" ? nlohmann::json(v.get<double>()) : nlohmann::json(static_cast<int64_t>(v.get<double>()));
  }
  return out;
}

namespace {

// The sandboxes' part of UsageOf: what a create's check needs, without reading every snapshot.
Result<TeamUsage> SandboxUsageOf(Store* store, const std::string& team) {
  TeamUsage u;
  ASSIGN_OR_RETURN(std::vector<Sandbox> live, store->ListLiveSandboxes());
  for (const auto& s : live) {
    if (s.team != team || IsEnded(s.state) || s.state == SandboxState::kSuspended) continue;
    ++u.sandboxes;
    u.cpus += s.resources.cpus;
    u.memory_mb += s.resources.memory_mb;
    u.disk_mb += s.resources.disk_mb;
  }
  return u;
}

}  // namespace

Result<TeamUsage> UsageOf(Store* store, const std::string& team) {
  ASSIGN_OR_RETURN(TeamUsage u, SandboxUsageOf(store, team));
  ASSIGN_OR_RETURN(std::vector<SnapshotRecord> snaps, store->ListSnapshots(""));
  for (const auto& s : snaps) u.snapshots += s.team == team;
  return u;
}

Status AdmitSandbox(Store* store, const std::string& team, const Resources& r, int count) {
  ASSIGN_OR_RETURN(nlohmann::json q, QuotasOf(store, team));
  if (!q.contains("sandboxes") && !q.contains("cpus") && !q.contains("memory_mb") && !q.contains("disk_mb")) {
    return Status::Ok();
  }
  ASSIGN_OR_RETURN(TeamUsage u, SandboxUsageOf(store, team));
  const double n = count;
  RETURN_IF_ERROR(Check(team, q, "sandboxes", static_cast<double>(u.sandboxes), n));
  RETURN_IF_ERROR(Check(team, q, "cpus", u.cpus, n * r.cpus));
  RETURN_IF_ERROR(Check(team, q, "memory_mb", static_cast<double>(u.memory_mb), n * static_cast<double>(r.memory_mb)));
  return Check(team, q, "disk_mb", static_cast<double>(u.disk_mb), n * static_cast<double>(r.disk_mb));
}

Status AdmitSnapshot(Store* store, const std::string& team) {
  ASSIGN_OR_RETURN(nlohmann::json q, QuotasOf(store, team));
  if (!q.contains("snapshots")) return Status::Ok();
  ASSIGN_OR_RETURN(TeamUsage u, UsageOf(store, team));
  return Check(team, q, "snapshots", static_cast<double>(u.snapshots), 1);
}

}  // namespace space::store
