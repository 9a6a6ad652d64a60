// Credentials (write-only secrets) and egress profiles, per team.
#include <nlohmann/json.hpp>

#include "api/api.h"
#include "http/validate.h"

namespace space::api {

void Api::Credentials(Request& req, Responder& res, const std::string& name) {
  const std::string& m = req.method;
  if (name.empty()) {
    if (m != "GET") return res.SendError(NotFound("no route for " + m + " " + req.path));
    auto list = node_->ListCredentials(req.team);
    return list.ok() ? res.SendJson(200, *list) : res.SendError(list.status());
  }
  if (m == "PUT") {
    auto body = ParseObject(req.body);
    if (!body.ok()) return res.SendError(body.status());
    auto out = node_->PutCredential(req.team, name, *body);
    return out.ok() ? res.SendJson(200, *out) : res.SendError(out.status());
  }
  if (m == "GET") {
    auto out = node_->GetCredential(req.team, name);
    return out.ok() ? res.SendJson(200, *out) : res.SendError(out.status());
  }
  if (m == "DELETE") {
    Status st = node_->DeleteCredential(req.team, name);
    return st.ok() ? res.Send(204, "application/json", "") : res.SendError(st);
  }
  res.SendError(NotFound("no route for " + m + " " + req.path));
}

void Api::EgressProfiles(Request& req, Responder& res, const std::string& name) {
  const std::string& m = req.method;
  if (name.empty()) {
    if (m != "GET") return res.SendError(NotFound("no route for " + m + " " + req.path));
    auto list = node_->ListEgressProfiles(req.team);
    return list.ok() ? res.SendJson(200, *list) : res.SendError(list.status());
  }
  if (!IsTemplateName(name)) return res.SendError(InvalidArgument("egress profile name must match [a-z0-9][a-z0-9._-]{0,62}"));
  if (m == "PUT") {
    auto body = ParseObject(req.body);
    if (!body.ok()) return res.SendError(body.status());
    auto out = node_->PutEgressProfile(req.team, name, *body);
    return out.ok() ? res.SendJson(200, *out) : res.SendError(out.status());
  }
  if (m == "GET") {
    auto out = node_->GetEgressProfile(req.team, name);
    return out.ok() ? res.SendJson(200, *out) : res.SendError(out.status());
  }
  if (m == "DELETE") {
    Status st = node_->DeleteEgressProfile(req.team, name);
    return st.ok() ? res.Send(204, "application/json", "") : res.SendError(st);
  }
  res.SendError(NotFound("no route for " + m + " " + req.path));
}

}  // namespace space::api
