#include "http/team_keys.h"

#include <algorithm>

#include "common/clock.h"
#include "common/ids.h"
#include "common/random.h"
#include "http/authenticator.h"
#include "http/scopes.h"
#include "http/validate.h"
#include "store/quotas.h"

namespace space::api {
namespace {

nlohmann::json KeyJson(const store::ApiKeyRecord& k) {
  nlohmann::json j = {
      {"id", k.id},
      {"team", k.team},
      {"name", k.name},
      {"scopes", k.scopes},
      {"created_at", FormatRfc3339(k.created_at_ms)},
      {"expires_at", k.expires_at_ms ? nlohmann::json(FormatRfc3339(k.expires_at_ms)) : nlohmann::json()},
      {"revoked_at", k.revoked_at_ms ? nlohmann::json(FormatRfc3339(k.revoked_at_ms)) : nlohmann::json()}};
  return j;
}

void Audit(store::Store* store, const std::string& team, const std::string& action, nlohmann::json detail) {
  store::AuditEvent e;
  e.ts_ms = WallNowMs();
  e.team = team;
  e.kind = "admin";
  e.action = action;
  e.detail = std::move(detail);
  (void)store->AppendAudit(e);  // the change is made; a lost audit row must not undo it
}

Result<bool> TeamExists(store::Store* store, const std::string& name) {
  if (name == kAdminTeam) return true;
  ASSIGN_OR_RETURN(auto teams, store->ListTeams());
  return std::any_of(teams.begin(), teams.end(), [&](const store::TeamRecord& t) { return t.name == name; });
}

nlohmann::json TeamJson(const store::TeamRecord& t) {
  return {{"name", t.name}, {"created_at", FormatRfc3339(t.created_at_ms)}, {"quotas", t.quotas}};
}

void CreateTeam(store::Store* store, Request& req, Responder& res) {
  auto b = ParseObject(req.body);
  if (!b.ok()) return res.SendError(b.status());
  if (Status st = CheckKnownFields(*b, {"name", "quotas"}); !st.ok()) return res.SendError(st);
  auto name = GetString(*b, "name", "", 63);
  if (!name.ok()) return res.SendError(name.status());
  if (!IsTemplateName(*name))
    return res.SendError(InvalidArgument("field 'name' must match [a-z0-9][a-z0-9._-]{0,62}"));
  if (*name == kAdminTeam) return res.SendError(Conflict("team default exists (the admin team)"));
  store::TeamRecord t{*name, WallNowMs()};
  if (b->contains("quotas") && !(*b)["quotas"].is_null()) {
    auto q = store::ParseQuotas((*b)["quotas"]);
    if (!q.ok()) return res.SendError(q.status());
    t.quotas = *q;
  }
  if (Status st = store->PutTeam(t); !st.ok()) return res.SendError(st);
  Audit(store, t.name, "team_create", {{"team", t.name}, {"quotas", t.quotas}, {"by", req.key_id}});
  res.SendJson(201, TeamJson(t));
}

// GET /v1/teams/{name}: the team, its quotas and what it holds now.
void GetTeam(store::Store* store, Responder& res, const std::string& name) {
  store::TeamRecord t{name, 0};
  if (name != kAdminTeam) {
    auto found = store->GetTeam(name);
    if (!found.ok()) return res.SendError(found.status());
    t = *found;
  }
  auto usage = store::UsageOf(store, name);
  if (!usage.ok()) return res.SendError(usage.status());
  nlohmann::json j = TeamJson(t);
  if (name == kAdminTeam) j["created_at"] = nullptr;
  j["usage"] = usage->ToJson();
  res.SendJson(200, j);
}

// PUT /v1/teams/{name} {"quotas"}: replaces the team's quotas ({} lifts them all).
void SetQuotas(store::Store* store, Request& req, Responder& res, const std::string& name) {
  auto b = ParseObject(req.body);
  if (!b.ok()) return res.SendError(b.status());
  if (Status st = CheckKnownFields(*b, {"quotas"}); !st.ok()) return res.SendError(st);
  if (!b->contains("quotas")) return res.SendError(InvalidArgument("field 'quotas' is required"));
  if (name == kAdminTeam) return res.SendError(InvalidArgument("the admin team has no quotas"));
  auto q = store::ParseQuotas((*b)["quotas"]);
  if (!q.ok()) return res.SendError(q.status());
  if (Status st = store->SetTeamQuotas(name, *q); !st.ok()) return res.SendError(st);
  Audit(store, name, "team_quotas", {{"team", name}, {"quotas", *q}, {"by", req.key_id}});
  GetTeam(store, res, name);
}

void ListTeams(store::Store* store, Responder& res) {
  auto teams = store->ListTeams();
  if (!teams.ok()) return res.SendError(teams.status());
  nlohmann::json out =
      nlohmann::json::array({{{"name", kAdminTeam}, {"created_at", nullptr}, {"quotas", nlohmann::json::object()}}});
  for (const auto& t : *teams) out.push_back(TeamJson(t));
  res.SendJson(200, {{"teams", out}});
}

void CreateKey(store::Store* store, Request& req, Responder& res) {
  auto b = ParseObject(req.body);
  if (!b.ok()) return res.SendError(b.status());
  if (Status st = CheckKnownFields(*b, {"team", "name", "expires_at", "scopes"}); !st.ok()) return res.SendError(st);
  store::ApiKeyRecord k;
  auto team = GetString(*b, "team", "", 63);
  auto name = GetString(*b, "name", "", 64);
  auto scopes = GetStringList(*b, "scopes", 16, 32);
  auto expires = GetString(*b, "expires_at", "", 40);
  for (const Status& st : {team.status(), name.status(), scopes.status(), expires.status()}) {
    if (!st.ok()) return res.SendError(st);
  }
  if (team->empty()) return res.SendError(InvalidArgument("field 'team' is required"));
  if (name->empty() || !std::all_of(name->begin(), name->end(), [](char c) { return c > ' ' && c <= '~'; })) {
    return res.SendError(InvalidArgument("field 'name' must be 1..64 printable characters without spaces"));
  }
  auto exists = TeamExists(store, *team);
  if (!exists.ok()) return res.SendError(exists.status());
  if (!*exists) return res.SendError(NotFound("team " + team->substr(0, 64) + " not found"));
  k.scopes = b->contains("scopes") ? *scopes : DefaultScopes();
  if (k.scopes.empty()) return res.SendError(InvalidArgument("field 'scopes' must name at least one scope"));
  for (const auto& s : k.scopes) {
    if (!IsScope(s)) {
      std::string all;
      for (const auto& a : AllScopes()) all += (all.empty() ? "" : ", ") + a;
      return res.SendError(InvalidArgument("unknown scope '" + s.substr(0, 32) + "' (scopes: " + all + ")"));
    }
    if (s == kAdminScope && *team != kAdminTeam) {
      return res.SendError(InvalidArgument("only the admin team's keys may hold the admin scope"));
    }
  }
  std::sort(k.scopes.begin(), k.scopes.end());
  k.scopes.erase(std::unique(k.scopes.begin(), k.scopes.end()), k.scopes.end());
  k.created_at_ms = WallNowMs();
  if (!expires->empty()) {
    auto at = ParseRfc3339Utc(*expires);
    if (!at.ok()) return res.SendError(InvalidArgument("field 'expires_at' " + at.status().message()));
    if (*at <= k.created_at_ms) return res.SendError(InvalidArgument("field 'expires_at' is in the past"));
    k.expires_at_ms = *at;
  }
  k.id = NewId("key");
  k.team = *team;
  k.name = *name;
  k.salt = RandomHex(16);
  const std::string secret = RandomHex(32);
  k.secret_sha256 = KeyDigest(k.salt + secret);
  if (Status st = store->PutKey(k); !st.ok()) return res.SendError(st);
  Audit(store, k.team, "key_create", {{"key", k.id}, {"name", k.name}, {"scopes", k.scopes}, {"by", req.key_id}});
  nlohmann::json out = KeyJson(k);
  out["key"] = std::string(kScopedKeyPrefix) + k.id + "." + secret;
  res.SendJson(201, out);
}

void ListKeys(store::Store* store, Request& req, Responder& res) {
  auto keys = store->ListKeys(req.Query("team"));
  if (!keys.ok()) return res.SendError(keys.status());
  nlohmann::json out = nlohmann::json::array();
  for (const auto& k : *keys) out.push_back(KeyJson(k));
  res.SendJson(200, {{"keys", out}});
}

void Self(store::Store* store, Request& req, Responder& res) {
  if (req.key_id.empty()) {
    // A key stored by digest (the admin key file's): no id, nothing to revoke through the API.
    return res.SendJson(200, {{"id", nullptr}, {"team", req.team}, {"scopes", req.scopes}, {"expires_at", nullptr}});
  }
  auto k = store->GetKey(req.key_id);
  if (!k.ok()) return res.SendError(k.status());
  res.SendJson(200, KeyJson(*k));
}

void RevokeKey(store::Store* store, Request& req, Responder& res, const std::string& id) {
  if (!IsPublicId(id, "key")) return res.SendError(NotFound("key " + id.substr(0, 80) + " not found"));
  auto k = store->GetKey(id);
  if (!k.ok()) return res.SendError(k.status());
  if (Status st = store->RevokeKey(id, WallNowMs()); !st.ok()) return res.SendError(st);
  Audit(store, k->team, "key_revoke", {{"key", id}, {"name", k->name}, {"by", req.key_id}});
  res.Send(204, "application/json", "");
}

}  // namespace

bool HandleTeamsAndKeys(store::Store* store, Request& req, Responder& res) {
  auto p = SplitPath(req.path);
  if (p.size() < 2 || p[0] != "v1" || (p[1] != "teams" && p[1] != "keys")) return false;
  const std::string& m = req.method;
  const bool self = p.size() == 3 && p[1] == "keys" && p[2] == "self";
  if (!self && !HasScope(req.scopes, kAdminScope)) {
    res.SendError(PermissionDenied("teams and keys are managed with an admin key (scope 'admin')"));
    return true;
  }
  if (p[1] == "teams" && p.size() == 2 && m == "POST") {
    CreateTeam(store, req, res);
  } else if (p[1] == "teams" && p.size() == 2 && m == "GET") {
    ListTeams(store, res);
  } else if (p[1] == "teams" && p.size() == 3 && m == "GET") {
    GetTeam(store, res, p[2]);
  } else if (p[1] == "teams" && p.size() == 3 && m == "PUT") {
    SetQuotas(store, req, res, p[2]);
  } else if (p.size() == 2 && m == "POST") {
    CreateKey(store, req, res);
  } else if (p.size() == 2 && m == "GET") {
    ListKeys(store, req, res);
  } else if (self && m == "GET") {
    Self(store, req, res);
  } else if (p[1] == "keys" && p.size() == 3 && m == "DELETE") {
    RevokeKey(store, req, res, p[2]);
  } else {
    res.SendError(NotFound("no route for " + m + " " + req.path.substr(0, 256)));
  }
  return true;
}

}  // namespace space::api
