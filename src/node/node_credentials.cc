// Credentials and egress profiles: validation and sealing live in src/credentials; this file
// stores them per team and hands sandboxes placeholders. A secret is unsealed only by the
// egress gateway (node_egress.cc); nothing here ever returns or logs one.
#include <cstdlib>

#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "credentials/credential.h"
#include "credentials/egress_profile.h"
#include "credentials/secret_box.h"
#include "node/node.h"
#include "node/stored_credential.h"

namespace space::node {
namespace {

// The stored (public) form of a credential spec: what the API shows, plus the raw expiry.
nlohmann::json StoredSpec(const credentials::CredentialSpec& s) {
  return {{"hosts", s.hosts},         {"header", s.header}, {"format", s.format},
          {"env", s.env},             {"scope", s.scope},   {"expires_at_ms", s.expires_at_ms},
          {"rate_limit_per_min", s.rate_limit_per_min}};
}

}  // namespace

Result<credentials::CredentialSpec> CredentialSpecFromStored(const std::string& name, const std::string& json) {
  auto j = nlohmann::json::parse(json, nullptr, false);
  if (!j.is_object()) return Internal("credential " + name + ": stored spec is corrupt");
  credentials::CredentialSpec s;
  s.name = name;
  s.hosts = j.value("hosts", std::vector<std::string>{});
  s.header = j.value("header", std::string("Authorization"));
  s.format = j.value("format", std::string("Bearer {secret}"));
  s.env = j.value("env", std::string());
  s.scope = j.value("scope", std::string("team"));
  s.expires_at_ms = j.value("expires_at_ms", int64_t{0});
  s.rate_limit_per_min = j.value("rate_limit_per_min", 0);
  return s;
}


Result<nlohmann::json> Node::PutCredential(const std::string& team, const std::string& name,
                                           const nlohmann::json& body) {
  std::string secret;
  int64_t now = WallNowMs();
  ASSIGN_OR_RETURN(credentials::CredentialSpec spec, credentials::ParseCredentialRequest(name, body, &secret, now));
  auto sealed = credentials::Seal(*kek_, secret, credentials::CredentialAad(team, name));
  std::fill(secret.begin(), secret.end(), '\0');
  if (!sealed.ok()) return sealed.status();
  RETURN_IF_ERROR(store_->PutCredential({team, name, StoredSpec(spec).dump(), *sealed, now}));
  Audit(team, "", "credential", "put", {{"credential", name}, {"hosts", spec.hosts}, {"scope", spec.scope}});
  return credentials::CredentialJson(spec, now);
}

Result<nlohmann::json> Node::GetCredential(const std::string& team, const std::string& name) {
  ASSIGN_OR_RETURN(store::CredentialRecord rec, store_->GetCredential(team, name));
  ASSIGN_OR_RETURN(credentials::CredentialSpec spec, CredentialSpecFromStored(name, rec.spec_json));
  return credentials::CredentialJson(spec, rec.created_at_ms);
}

Result<nlohmann::json> Node::ListCredentials(const std::string& team) {
  ASSIGN_OR_RETURN(auto recs, store_->ListCredentials(team));
  nlohmann::json out = nlohmann::json::array();
  for (const auto& r : recs) {
    ASSIGN_OR_RETURN(credentials::CredentialSpec spec, CredentialSpecFromStored(r.name, r.spec_json));
    out.push_back(credentials::CredentialJson(spec, r.created_at_ms));
  }
  return nlohmann::json{{"credentials", out}};
}

Status Node::DeleteCredential(const std::string& team, const std::string& name) {
  RETURN_IF_ERROR(store_->DeleteCredential(team, name));
  Audit(team, "", "credential", "delete", {{"credential", name}});
  return Status::Ok();
}

Result<nlohmann::json> Node::PutEgressProfile(const std::string& team, const std::string& name,
                                              const nlohmann::json& body) {
  ASSIGN_OR_RETURN(credentials::EgressProfile p, credentials::ParseEgressProfile(name, body));
  nlohmann::json j = credentials::EgressProfileJson(p);
  RETURN_IF_ERROR(store_->PutEgressProfile({team, name, j.dump(), WallNowMs()}));
  Audit(team, "", "egress", "profile_put", {{"profile", name}});
  return j;
}

Result<nlohmann::json> Node::GetEgressProfile(const std::string& team, const std::string& name) {
  ASSIGN_OR_RETURN(store::EgressProfileRecord rec, store_->GetEgressProfile(team, name));
  auto j = nlohmann::json::parse(rec.spec_json, nullptr, false);
  if (!j.is_object()) return Internal("egress profile " + name + ": stored spec is corrupt");
  return j;
}

Result<nlohmann::json> Node::ListEgressProfiles(const std::string& team) {
  ASSIGN_OR_RETURN(auto recs, store_->ListEgressProfiles(team));
  nlohmann::json out = nlohmann::json::array();
  for (const auto& r : recs) {
    auto j = nlohmann::json::parse(r.spec_json, nullptr, false);
    if (j.is_object()) out.push_back(std::move(j));
  }
  return nlohmann::json{{"egress_profiles", out}};
}

Status Node::DeleteEgressProfile(const std::string& team, const std::string& name) {
  RETURN_IF_ERROR(store_->DeleteEgressProfile(team, name));
  Audit(team, "", "egress", "profile_delete", {{"profile", name}});
  return Status::Ok();
}

Status Node::AttachCredentials(const CreateRequest& req, const std::string& sandbox_id,
                               std::map<std::string, std::string>* env) {
  int64_t now = WallNowMs();
  // Every credential is checked before any is attached, so a refused create leaves nothing.
  std::vector<credentials::CredentialSpec> specs;
  for (const auto& name : req.credentials) {
    auto rec = store_->GetCredential(req.team, name);
    if (!rec.ok()) return NotFound("credential " + name + " not found");
    ASSIGN_OR_RETURN(credentials::CredentialSpec spec, CredentialSpecFromStored(name, rec->spec_json));
    if (spec.expires_at_ms != 0 && spec.expires_at_ms <= now) {
      return Conflict("credential " + name + " expired at " + FormatRfc3339(spec.expires_at_ms));
    }
    if (!credentials::ScopeMatches(spec, sandbox_id, req.metadata)) {
      return PermissionDenied("credential " + name + " is scoped to " + spec.scope + ", which this sandbox is not");
    }
    specs.push_back(std::move(spec));
  }
  for (const auto& spec : specs) {
    const std::string& name = spec.name;
    std::string placeholder = credentials::NewPlaceholder();
    RETURN_IF_ERROR(store_->PutSandboxCredential({sandbox_id, name, placeholder}));
    if (!spec.env.empty()) (*env)[spec.env] = placeholder;
    Audit(req.team, sandbox_id, "credential", "attach", {{"credential", name}, {"hosts", spec.hosts}});
  }
  return Status::Ok();
}

}  // namespace space::node
