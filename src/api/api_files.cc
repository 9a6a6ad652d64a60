// Files: every path is resolved by the sandbox's guest inside the sandbox's own root.
#include <nlohmann/json.hpp>

#include "api/api.h"
#include "http/validate.h"

namespace space::api {
namespace {

nlohmann::json EntryJson(const node::FileEntry& e) {
  return {{"name", e.name}, {"path", e.path}, {"type", node::FileTypeName(e.type)},
          {"size", e.size}, {"mode", e.mode}, {"mtime", e.mtime}};
}

}  // namespace

void Api::Files(Request& req, Responder& res, const std::string& id, const std::string& action) {
  if (action.empty()) return res.SendError(NotFound("no route for " + req.method + " " + req.path));
  if (Status st = AutoResume(req, id); !st.ok()) return res.SendError(st);
  if (action == "mkdir" || action == "move") {
    auto b = ParseObject(req.body);
    if (!b.ok()) return res.SendError(b.status());
    Status st;
    if (action == "mkdir") {
      if (Status st = CheckKnownFields(*b, {"path"}); !st.ok()) return res.SendError(st);
      auto path = GetString(*b, "path", "", 4096);
      if (!path.ok()) return res.SendError(path.status());
      if (Status st = CheckSandboxPath(*path); !st.ok()) return res.SendError(st);
      st = node_->io().MakeDir(req.team, id, *path);
    } else {
      if (Status st = CheckKnownFields(*b, {"from", "to"}); !st.ok()) return res.SendError(st);
      auto from = GetString(*b, "from", "", 4096);
      auto to = GetString(*b, "to", "", 4096);
      if (!from.ok()) return res.SendError(from.status());
      if (!to.ok()) return res.SendError(to.status());
      if (Status st = CheckSandboxPath(*from); !st.ok()) return res.SendError(st);
      if (Status st = CheckSandboxPath(*to); !st.ok()) return res.SendError(st);
      st = node_->io().Move(req.team, id, *from, *to);
    }
    return st.ok() ? res.SendJson(200, {{"ok", true}}) : res.SendError(st);
  }
  std::string path = req.Query("path");
  if (Status st = CheckSandboxPath(path); !st.ok()) return res.SendError(st);
  if (action == "read") {
    auto body = node_->io().ReadFile(req.team, id, path);
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
    Status st = node_->io().WriteFile(req.team, id, path, mode, req.body);
    if (!st.ok()) return res.SendError(st);
    return res.SendJson(201, {{"path", path}, {"size", req.body.size()}});
  }
  if (action == "delete") {
    Status st = node_->io().Remove(req.team, id, path, req.Query("recursive") == "true");
    return st.ok() ? res.Send(204, "application/json", "") : res.SendError(st);
  }
  if (action == "list") {
    long depth = req.HasQuery("depth") ? std::strtol(req.Query("depth").c_str(), nullptr, 10) : 1;
    if (depth < 1 || depth > 8) return res.SendError(InvalidArgument("depth must be between 1 and 8"));
    auto list = node_->io().ListDir(req.team, id, path, static_cast<int>(depth));
    if (!list.ok()) return res.SendError(list.status());
    nlohmann::json entries = nlohmann::json::array();
    for (const auto& e : *list) entries.push_back(EntryJson(e));
    return res.SendJson(200, {{"entries", entries}});
  }
  if (action != "stat") return res.SendError(NotFound("no route for " + req.method + " " + req.path));
  auto entry = node_->io().Stat(req.team, id, path);
  if (!entry.ok()) return res.SendError(entry.status());
  res.SendJson(200, EntryJson(*entry));
}

}  // namespace space::api
