// Credentials (write-only secrets) and egress profiles, per team: bodies parsed here into
// typed specs (src/credentials), stored by the node's CredentialService.
#include <nlohmann/json.hpp>

#include "api/api.h"
#include "common/clock.h"
#include "http/validate.h"

namespace space::api {

void Api::Credentials(Request& req, Responder& res, const std::string& name) {
  const std::string& m = req.method;
  node::CredentialService& creds = node_->credentials();
  if (name.empty()) {
    if (m != "GET") return res.SendError(NotFound("no route for " + m + " " + req.path));
    auto list = creds.List(req.team);
    if (!list.ok()) return res.SendError(list.status());
    nlohmann::json out = nlohmann::json::array();
    for (const auto& c : *list) out.push_back(credentials::CredentialJson(c.spec, c.created_at_ms));
    return res.SendJson(200, {{"credentials", out}});
  }
  if (m == "PUT") {
    auto body = ParseObject(req.body);
    if (!body.ok()) return res.SendError(body.status());
    std::string secret;
    auto spec = credentials::ParseCredentialRequest(name, *body, &secret, WallNowMs());
    if (!spec.ok()) return res.SendError(spec.status());
    auto out = creds.Put(req.team, *spec, std::move(secret));
    return out.ok() ? res.SendJson(200, credentials::CredentialJson(out->spec, out->created_at_ms))
                    : res.SendError(out.status());
  }
  if (m == "GET") {
    auto out = creds.Get(req.team, name);
    return out.ok() ? res.SendJson(200, credentials::CredentialJson(out->spec, out->created_at_ms))
                    : res.SendError(out.status());
  }
  if (m == "DELETE") {
    Status st = creds.Delete(req.team, name);
    return st.ok() ? res.Send(204, "application/json", "") : res.SendError(st);
  }
  res.SendError(NotFound("no route for " + m + " " + req.path));
}

void Api::EgressProfiles(Request& req, Responder& res, const std::string& name) {
  const std::string& m = req.method;
  node::CredentialService& creds = node_->credentials();
  if (name.empty()) {
    if (m != "GET") return res.SendError(NotFound("no route for " + m + " " + req.path));
    auto list = creds.ListProfiles(req.team);
    if (!list.ok()) return res.SendError(list.status());
    nlohmann::json out = nlohmann::json::array();
    for (const auto& p : *list) out.push_back(credentials::EgressProfileJson(p));
    return res.SendJson(200, {{"egress_profiles", out}});
  }
  if (!IsTemplateName(name)) return res.SendError(InvalidArgument("egress profile name must match [a-z0-9][a-z0-9._-]{0,62}"));
  if (m == "PUT") {
    auto body = ParseObject(req.body);
    if (!body.ok()) return res.SendError(body.status());
    auto profile = credentials::ParseEgressProfile(name, *body);
    if (!profile.ok()) return res.SendError(profile.status());
    Status st = creds.PutProfile(req.team, *profile);
    return st.ok() ? res.SendJson(200, credentials::EgressProfileJson(*profile)) : res.SendError(st);
  }
  if (m == "GET") {
    auto out = creds.GetProfile(req.team, name);
    return out.ok() ? res.SendJson(200, credentials::EgressProfileJson(*out)) : res.SendError(out.status());
  }
  if (m == "DELETE") {
    Status st = creds.DeleteProfile(req.team, name);
    return st.ok() ? res.Send(204, "application/json", "") : res.SendError(st);
  }
  res.SendError(NotFound("no route for " + m + " " + req.path));
}

}  // namespace space::api
