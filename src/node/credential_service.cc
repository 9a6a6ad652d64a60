#include "node/credential_service.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "credentials/secret_box.h"

namespace space::node {
namespace {

// The stored (public) form of a credential spec: what the API shows, plus the raw expiry.
std::string EncodeSpec(const credentials::CredentialSpec& s) {
  return nlohmann::json{{"hosts", s.hosts},
                        {"header", s.header},
                        {"format", s.format},
                        {"env", s.env},
                        {"scope", s.scope},
                        {"expires_at_ms", s.expires_at_ms},
                        {"rate_limit_per_min", s.rate_limit_per_min}}
      .dump();
}

}  // namespace

Result<credentials::CredentialSpec> CredentialService::StoredSpec(const store::CredentialRecord& rec) {
  auto j = nlohmann::json::parse(rec.spec_json, nullptr, false);
  if (!j.is_object()) return Internal("credential " + rec.name + ": stored spec is corrupt");
  credentials::CredentialSpec s;
  s.name = rec.name;
  try {
    s.hosts = j.value("hosts", std::vector<std::string>{});
    s.header = j.value("header", s.header);
    s.format = j.value("format", s.format);
    s.env = j.value("env", std::string());
    s.scope = j.value("scope", s.scope);
    s.expires_at_ms = j.value("expires_at_ms", int64_t{0});
    s.rate_limit_per_min = j.value("rate_limit_per_min", 0);
  } catch (const nlohmann::json::exception& e) {
    return Internal("credential " + rec.name + ": stored spec is corrupt: " + e.what());
  }
  return s;
}

Result<CredentialInfo> CredentialService::Put(const std::string& team, const credentials::CredentialSpec& spec,
                                              std::string secret) {
  const int64_t now = WallNowMs();
  auto sealed = credentials::Seal(*kek_, secret, credentials::CredentialAad(team, spec.name));
  std::fill(secret.begin(), secret.end(), '\0');
  if (!sealed.ok()) return sealed.status();
  RETURN_IF_ERROR(store_->PutCredential({team, spec.name, EncodeSpec(spec), *sealed, now}));
  audit_->Record(team, "", "credential", "put",
                 {{"credential", spec.name}, {"hosts", spec.hosts}, {"scope", spec.scope}});
  return CredentialInfo{spec, now};
}

Result<CredentialInfo> CredentialService::Get(const std::string& team, const std::string& name) {
  ASSIGN_OR_RETURN(store::CredentialRecord rec, store_->GetCredential(team, name));
  ASSIGN_OR_RETURN(credentials::CredentialSpec spec, StoredSpec(rec));
  return CredentialInfo{std::move(spec), rec.created_at_ms};
}

Result<std::vector<CredentialInfo>> CredentialService::List(const std::string& team) {
  ASSIGN_OR_RETURN(auto recs, store_->ListCredentials(team));
  std::vector<CredentialInfo> out;
  for (const auto& r : recs) {
    ASSIGN_OR_RETURN(credentials::CredentialSpec spec, StoredSpec(r));
    out.push_back({std::move(spec), r.created_at_ms});
  }
  return out;
}

Status CredentialService::Delete(const std::string& team, const std::string& name) {
  RETURN_IF_ERROR(store_->DeleteCredential(team, name));
  audit_->Record(team, "", "credential", "delete", {{"credential", name}});
  return Status::Ok();
}

Status CredentialService::PutProfile(const std::string& team, const credentials::EgressProfile& profile) {
  RETURN_IF_ERROR(
      store_->PutEgressProfile({team, profile.name, credentials::EgressProfileJson(profile).dump(), WallNowMs()}));
  audit_->Record(team, "", "egress", "profile_put", {{"profile", profile.name}});
  return Status::Ok();
}

Result<credentials::EgressProfile> CredentialService::StoredProfile(const store::EgressProfileRecord& rec) {
  auto spec = nlohmann::json::parse(rec.spec_json, nullptr, false);
  if (!spec.is_object()) return Internal("egress profile " + rec.name + ": stored spec is corrupt");
  spec.erase("name");  // stored in the API's shape, name included
  auto profile = credentials::ParseEgressProfile(rec.name, spec);
  if (!profile.ok()) {
    return Internal("egress profile " + rec.name + ": stored spec is corrupt: " + profile.status().message());
  }
  return profile;
}

Result<credentials::EgressProfile> CredentialService::GetProfile(const std::string& team, const std::string& name) {
  ASSIGN_OR_RETURN(store::EgressProfileRecord rec, store_->GetEgressProfile(team, name));
  return StoredProfile(rec);
}

Result<std::vector<credentials::EgressProfile>> CredentialService::ListProfiles(const std::string& team) {
  ASSIGN_OR_RETURN(auto recs, store_->ListEgressProfiles(team));
  std::vector<credentials::EgressProfile> out;
  for (const auto& r : recs) {
    // A corrupt row is left out of the list rather than hiding every other profile.
    if (auto p = StoredProfile(r); p.ok()) out.push_back(std::move(*p));
  }
  return out;
}

Status CredentialService::DeleteProfile(const std::string& team, const std::string& name) {
  RETURN_IF_ERROR(store_->DeleteEgressProfile(team, name));
  audit_->Record(team, "", "egress", "profile_delete", {{"profile", name}});
  return Status::Ok();
}

Status CredentialService::Attach(const std::string& team, const std::string& sandbox_id,
                                 const std::vector<std::string>& names,
                                 const std::map<std::string, std::string>& metadata,
                                 std::map<std::string, std::string>* env) {
  const int64_t now = WallNowMs();
  std::vector<credentials::CredentialSpec> specs;
  for (const auto& name : names) {
    auto rec = store_->GetCredential(team, name);
    if (!rec.ok()) return NotFound("credential " + name + " not found");
    ASSIGN_OR_RETURN(credentials::CredentialSpec spec, StoredSpec(*rec));
    if (spec.expires_at_ms != 0 && spec.expires_at_ms <= now) {
      return Conflict("credential " + name + " expired at " + FormatRfc3339(spec.expires_at_ms));
    }
    if (!credentials::ScopeMatches(spec, sandbox_id, metadata)) {
      return PermissionDenied("credential " + name + " is scoped to " + spec.scope + ", which this sandbox is not");
    }
    specs.push_back(std::move(spec));
  }
  for (const auto& spec : specs) {
    std::string placeholder = credentials::NewPlaceholder();
    RETURN_IF_ERROR(store_->PutSandboxCredential({sandbox_id, spec.name, placeholder}));
    if (!spec.env.empty()) (*env)[spec.env] = placeholder;
    audit_->Record(team, sandbox_id, "credential", "attach", {{"credential", spec.name}, {"hosts", spec.hosts}});
  }
  return Status::Ok();
}

Result<std::vector<std::string>> CredentialService::InheritedBy(const std::string& team, const std::string& parent_id,
                                                                std::map<std::string, std::string>* env) {
  std::vector<std::string> names;
  ASSIGN_OR_RETURN(auto held, HeldBy(team, parent_id));
  for (const auto& h : held) {
    if (h.spec.scope.rfind("sandbox:", 0) == 0) {
      if (!h.spec.env.empty()) env->erase(h.spec.env);
      continue;
    }
    names.push_back(h.spec.name);
  }
  return names;
}

Result<std::vector<HeldCredential>> CredentialService::HeldBy(const std::string& team, const std::string& sandbox_id) {
  ASSIGN_OR_RETURN(auto creds, store_->ListSandboxCredentials(sandbox_id));
  std::vector<HeldCredential> out;
  for (const auto& c : creds) {
    auto stored = store_->GetCredential(team, c.name);
    if (!stored.ok()) continue;
    ASSIGN_OR_RETURN(credentials::CredentialSpec spec, StoredSpec(*stored));
    out.push_back({std::move(spec), c.placeholder});
  }
  return out;
}

Result<std::string> CredentialService::Unseal(const std::string& team, const std::string& name) {
  ASSIGN_OR_RETURN(store::CredentialRecord rec, store_->GetCredential(team, name));
  return credentials::Open(*kek_, rec.sealed_secret, credentials::CredentialAad(team, name));
}

}  // namespace space::node
