// Volumes: PUT/GET/DELETE /v1/volumes/{name}, GET /v1/volumes, POST /v1/volumes/{name}/fork.
// The node's Volumes part keeps them (node/volumes.h).
#include <nlohmann/json.hpp>

#include "api/api.h"
#include "common/clock.h"
#include "http/validate.h"

namespace space::api {

nlohmann::json VolumeJson(const store::VolumeRecord& v, const std::vector<store::VolumeMountRecord>* mounts) {
  nlohmann::json j = {{"name", v.name},
                      {"id", v.id},
                      {"size_mb", v.size_mb},
                      {"created_at", FormatRfc3339(v.created_at_ms)},
                      {"node", v.node.empty() ? nlohmann::json(nullptr) : nlohmann::json(v.node)},
                      {"synced", !v.manifest.empty() && v.node.empty()},
                      {"forked_from", v.parent.empty() ? nlohmann::json(nullptr) : nlohmann::json(v.parent)}};
  if (mounts != nullptr) {
    nlohmann::json m = nlohmann::json::array();
    for (const auto& r : *mounts) m.push_back({{"sandbox", r.sandbox}, {"path", r.path}, {"read_only", r.read_only}});
    j["mounts"] = std::move(m);
  }
  return j;
}

void Api::Volumes(Request& req, Responder& res, const std::string& name, const std::string& action) {
  node::Volumes& volumes = node_->volumes();
  const std::string& m = req.method;
  auto with_mounts = [&](const store::VolumeRecord& v) -> Result<nlohmann::json> {
    ASSIGN_OR_RETURN(auto mounts, volumes.Mounts(v));
    return VolumeJson(v, &mounts);
  };
  if (name.empty() && action.empty() && m == "GET") {
    auto list = volumes.List(req.team);
    if (!list.ok()) return res.SendError(list.status());
    nlohmann::json out = nlohmann::json::array();
    for (const auto& v : *list) {
      auto j = with_mounts(v);
      if (!j.ok()) return res.SendError(j.status());
      out.push_back(std::move(*j));
    }
    return res.SendJson(200, {{"volumes", out}});
  }
  if (!name.empty() && action.empty() && m == "PUT") {
    auto body = ParseObject(req.body.empty() ? "{}" : req.body);
    if (!body.ok()) return res.SendError(body.status());
    if (Status st = CheckKnownFields(*body, {"size_mb"}); !st.ok()) return res.SendError(st);
    auto size = GetInt(*body, "size_mb", node::kDefaultVolumeSizeMb, 1, node::kMaxVolumeSizeMb);
    if (!size.ok()) return res.SendError(size.status());
    auto made = volumes.Create(req.team, name, *size);
    if (made.ok()) {
      auto j = with_mounts(*made);
      return j.ok() ? res.SendJson(201, *j) : res.SendError(j.status());
    }
    // PUT again with the same size is the same volume; another size is not a resize.
    if (made.status().code() == StatusCode::kConflict) {
      auto have = volumes.Get(req.team, name);
      if (have.ok() && have->size_mb == *size) {
        auto j = with_mounts(*have);
        return j.ok() ? res.SendJson(200, *j) : res.SendError(j.status());
      }
      if (have.ok()) {
        return res.SendError(Conflict("volume " + name + " exists with size_mb " + std::to_string(have->size_mb) +
                                      " (volumes are not resized)"));
      }
    }
    return res.SendError(made.status());
  }
  if (!name.empty() && action.empty() && m == "GET") {
    auto v = volumes.Get(req.team, name);
    if (!v.ok()) return res.SendError(v.status());
    auto j = with_mounts(*v);
    return j.ok() ? res.SendJson(200, *j) : res.SendError(j.status());
  }
  if (!name.empty() && action.empty() && m == "DELETE") {
    Status st = volumes.Delete(req.team, name);
    return st.ok() ? res.Send(204, "application/json", "") : res.SendError(st);
  }
  if (!name.empty() && action == "fork" && m == "POST") {
    auto body = ParseObject(req.body);
    if (!body.ok()) return res.SendError(body.status());
    if (Status st = CheckKnownFields(*body, {"name"}); !st.ok()) return res.SendError(st);
    auto new_name = GetString(*body, "name", "", 63);
    if (!new_name.ok()) return res.SendError(new_name.status());
    if (new_name->empty()) return res.SendError(InvalidArgument("name (the fork's) is required"));
    auto forked = volumes.Fork(req.team, name, *new_name);
    if (!forked.ok()) return res.SendError(forked.status());
    auto j = with_mounts(*forked);
    return j.ok() ? res.SendJson(201, *j) : res.SendError(j.status());
  }
  res.SendError(NotFound("no route for " + m + " " + req.path.substr(0, 256)));
}

}  // namespace space::api
