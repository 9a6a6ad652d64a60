// Preview ports: POST/GET /v1/sandboxes/{id}/ports, DELETE /v1/sandboxes/{id}/ports/{port}.
// The node's Ports part keeps them; the ingress (ingress/ingress.h) serves their URLs.
#include <nlohmann/json.hpp>

#include "api/api.h"
#include "common/clock.h"
#include "http/validate.h"

namespace space::api {
namespace {

nlohmann::json PortJson(const node::PortView& p) {
  return {{"port", p.port},
          {"public", p.is_public},
          {"auto_resume", p.auto_resume},
          {"url", p.url},
          {"created_at", FormatRfc3339(p.created_at_ms)},
          {"connections", p.connections},
          {"requests", p.requests}};
}

}  // namespace

void Api::Ports(Request& req, Responder& res, const std::string& id, const std::string& port) {
  node::Ports& ports = node_->ports();
  const std::string& m = req.method;
  if (port.empty() && m == "POST") {
    auto body = ParseObject(req.body);
    if (!body.ok()) return res.SendError(body.status());
    if (Status st = CheckKnownFields(*body, {"port", "public", "auto_resume"}); !st.ok()) return res.SendError(st);
    if (!body->contains("port")) return res.SendError(InvalidArgument("port is required (1..65535)"));
    auto n = GetInt(*body, "port", 0, 1, 65535);
    auto is_public = GetBool(*body, "public", false);
    auto auto_resume = GetBool(*body, "auto_resume", false);
    if (!n.ok()) return res.SendError(n.status());
    if (!is_public.ok()) return res.SendError(is_public.status());
    if (!auto_resume.ok()) return res.SendError(auto_resume.status());
    auto opened = ports.Open(req.team, id, *n, *is_public, *auto_resume);
    if (!opened.ok()) return res.SendError(opened.status());
    nlohmann::json out = PortJson(opened->view);
    out["token"] = opened->token.empty() ? nlohmann::json(nullptr) : nlohmann::json(opened->token);
    return res.SendJson(201, out);
  }
  if (port.empty() && m == "GET") {
    auto list = ports.List(req.team, id);
    if (!list.ok()) return res.SendError(list.status());
    nlohmann::json out = nlohmann::json::array();
    for (const auto& p : *list) out.push_back(PortJson(p));
    return res.SendJson(200, {{"ports", out}});
  }
  if (!port.empty() && m == "DELETE") {
    int64_t n = 0;
    if (port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos) {
      return res.SendError(NotFound("port " + port.substr(0, 16) + " is not open"));
    }
    n = std::stoll(port);
    Status st = ports.Close(req.team, id, n);
    return st.ok() ? res.Send(204, "application/json", "") : res.SendError(st);
  }
  res.SendError(NotFound("no route for " + m + " " + req.path.substr(0, 256)));
}

}  // namespace space::api
