// Files: every path is resolved by the sandbox's guest inside the sandbox's own root.
#include <nlohmann/json.hpp>

#include "api/api.h"
#include "http/validate.h"

namespace space::api {
namespace {

// A file entry from the guest, rebuilt field by field: the guest is untrusted, so only the
// documented fields with the right types reach the client.
Result<nlohmann::json> SanitizeEntry(const nlohmann::json& e) {
  if (!e.is_object()) return Internal("the guest sent a malformed file entry");
  nlohmann::json out = nlohmann::json::object();
  for (const char* key : {"name", "path", "type", "mtime"}) {
    if (!e.contains(key) || !e[key].is_string() || e[key].get_ref<const std::string&>().size() > 4096) {
      return Internal(std::string("the guest sent a file entry without a valid '") + key + "'");
    }
    out[key] = e[key];
  }
  const std::string& type = out["type"].get_ref<const std::string&>();
  if (type != "file" && type != "dir" && type != "symlink" && type != "other") {
    return Internal("the guest sent a file entry of unknown type");
  }
  for (const char* key : {"size", "mode"}) {
    if (!e.contains(key) || !e[key].is_number_unsigned()) {
      return Internal(std::string("the guest sent a file entry without a valid '") + key + "'");
    }
    out[key] = e[key];
  }
  return out;
}

}  // namespace

void Api::Files(Request& req, Responder& res, const std::string& id, const std::string& action) {
  if (action.empty()) return res.SendError(NotFound("no route for " + req.method + " " + req.path));
  if (Status st = AutoResume(req, id); !st.ok()) return res.SendError(st);
  if (action == "mkdir" || action == "move") {
    auto b = ParseObject(req.body);
    if (!b.ok()) return res.SendError(b.status());
    nlohmann::json op = {{"op", action}};
    if (action == "mkdir") {
      if (Status st = CheckKnownFields(*b, {"path"}); !st.ok()) return res.SendError(st);
      auto path = GetString(*b, "path", "", 4096);
      if (!path.ok()) return res.SendError(path.status());
      if (Status st = CheckSandboxPath(*path); !st.ok()) return res.SendError(st);
      op["path"] = *path;
    } else {
      if (Status st = CheckKnownFields(*b, {"from", "to"}); !st.ok()) return res.SendError(st);
      auto from = GetString(*b, "from", "", 4096);
      auto to = GetString(*b, "to", "", 4096);
      if (!from.ok()) return res.SendError(from.status());
      if (!to.ok()) return res.SendError(to.status());
      if (Status st = CheckSandboxPath(*from); !st.ok()) return res.SendError(st);
      if (Status st = CheckSandboxPath(*to); !st.ok()) return res.SendError(st);
      op["path"] = *from;
      op["to"] = *to;
    }
    auto r = node_->FileOp(req.team, id, op);
    return r.ok() ? res.SendJson(200, {{"ok", true}}) : res.SendError(r.status());
  }
  std::string path = req.Query("path");
  if (Status st = CheckSandboxPath(path); !st.ok()) return res.SendError(st);
  if (action == "read") {
    auto body = node_->ReadFile(req.team, id, path);
    if (!body.ok()) return res.SendError(body.status());
    return res.Send(200, "application/octet-stream", std::move(*body));
  }
  if (action == "write") {
    int mode = 0644;
    if (req.HasQuery("mode")) {
      std::string m = req.Query("mode");
      char* end = nullptr;
      long v = std::strtol(m.c_str(), &end, 8);
      if (m.empty() || m.size() > 5 || *end != '\0' || v < 0 || v > 07777) {
        return res.SendError(InvalidArgument("mode must be octal permission bits, e.g. 0644"));
      }
      mode = static_cast<int>(v);
    }
    auto r = node_->WriteFile(req.team, id, path, mode, req.body);
    if (!r.ok()) return res.SendError(r.status());
    return res.SendJson(201, {{"path", path}, {"size", req.body.size()}});
  }
  nlohmann::json op = {{"op", action}, {"path", path}};
  if (action == "delete") op["recursive"] = req.Query("recursive") == "true";
  if (action == "list") {
    long depth = req.HasQuery("depth") ? std::strtol(req.Query("depth").c_str(), nullptr, 10) : 1;
    if (depth < 1 || depth > 8) return res.SendError(InvalidArgument("depth must be between 1 and 8"));
    op["depth"] = depth;
  }
  auto r = node_->FileOp(req.team, id, op);
  if (!r.ok()) return res.SendError(r.status());
  if (action == "delete") return res.Send(204, "application/json", "");
  if (action == "list") {
    if (!r->contains("entries") || !(*r)["entries"].is_array()) {
      return res.SendError(Internal("the guest sent a malformed directory listing"));
    }
    nlohmann::json entries = nlohmann::json::array();
    for (const auto& e : (*r)["entries"]) {
      auto clean = SanitizeEntry(e);
      if (!clean.ok()) return res.SendError(clean.status());
      entries.push_back(std::move(*clean));
    }
    return res.SendJson(200, {{"entries", entries}});
  }
  auto clean = SanitizeEntry(*r);
  if (!clean.ok()) return res.SendError(clean.status());
  res.SendJson(200, *clean);
}

}  // namespace space::api
