// envd's filesystem service (filesystem.Filesystem/*) relayed to the guest's file ops.
#include "common/log.h"
#include "e2b/connect.h"
#include "e2b/e2b.h"
#include "e2b/proto_json.h"
#include "e2b/rpc_request.h"
#include "node/node.h"

namespace space::e2b {
namespace {

using nlohmann::json;

constexpr int64_t kWatchKeepaliveMs = 15000;

std::string OwnerFor(const Target& t) { return t.user == "root" ? "" : t.user; }

const char* EventTypeWord(node::DirChange::Type type) {
  switch (type) {
    case node::DirChange::Type::kCreate: return "EVENT_TYPE_CREATE";
    case node::DirChange::Type::kWrite: return "EVENT_TYPE_WRITE";
    case node::DirChange::Type::kRemove: return "EVENT_TYPE_REMOVE";
    case node::DirChange::Type::kRename: return "EVENT_TYPE_RENAME";
    case node::DirChange::Type::kChmod: return "EVENT_TYPE_CHMOD";
  }
  return "EVENT_TYPE_UNSPECIFIED";
}

}  // namespace

void E2b::FilesystemRpc(api::Request& req, api::Responder& res, const Target& t, const std::string& method) {
  if (method == "WatchDir") return WatchDir(req, res, t);
  if (method == "CreateWatcher" || method == "GetWatcherEvents" || method == "RemoveWatcher") {
    return SendRpcError(res, "unimplemented", "polling watchers are not implemented; use WatchDir");
  }
  auto msg = UnaryMessage(req);
  if (!msg.ok()) return SendRpcError(res, msg.status());
  auto stat = [&](const std::string& path) -> Result<json> {
    ASSIGN_OR_RETURN(node::FileEntry e, node_->io().Stat(t.team, t.id, path));
    return json{{"entry", EntryInfoJson(e)}};
  };
  auto path_field = [&](const char* name) -> Result<std::string> {
    ASSIGN_OR_RETURN(std::string p, StringField(*msg, name, 4096));
    return ResolvePath(p, t.home);
  };
  if (method == "Stat") {
    auto path = path_field("path");
    if (!path.ok()) return SendRpcError(res, path.status());
    auto out = stat(*path);
    return out.ok() ? SendUnary(res, *out) : SendRpcError(res, out.status());
  }
  if (method == "ListDir") {
    auto path = path_field("path");
    if (!path.ok()) return SendRpcError(res, path.status());
    int64_t depth = 1;
    if (msg->contains("depth") && AsUint((*msg)["depth"])) {
      depth = static_cast<int64_t>(std::clamp<uint64_t>(*AsUint((*msg)["depth"]), 1, 8));
    }
    auto listing = node_->io().ListDir(t.team, t.id, *path, static_cast<int>(depth));
    if (!listing.ok()) return SendRpcError(res, listing.status());
    json entries = json::array();
    for (const auto& e : *listing) entries.push_back(EntryInfoJson(e));
    return SendUnary(res, {{"entries", entries}});
  }
  if (method == "MakeDir") {
    auto path = path_field("path");
    if (!path.ok()) return SendRpcError(res, path.status());
    // envd answers already_exists (the SDK returns false); the guest's mkdir is mkdir -p.
    if (stat(*path).ok()) return SendRpcError(res, "already_exists", "directory " + *path + " already exists");
    Status made = node_->io().MakeDir(t.team, t.id, *path, OwnerFor(t));
    if (!made.ok()) return SendRpcError(res, made);
    auto out = stat(*path);
    return out.ok() ? SendUnary(res, *out) : SendRpcError(res, out.status());
  }
  if (method == "Move") {
    auto from = path_field("source");
    auto to = path_field("destination");
    if (!from.ok()) return SendRpcError(res, from.status());
    if (!to.ok()) return SendRpcError(res, to.status());
    Status moved = node_->io().Move(t.team, t.id, *from, *to);
    if (!moved.ok()) return SendRpcError(res, moved);
    auto out = stat(*to);
    return out.ok() ? SendUnary(res, *out) : SendRpcError(res, out.status());
  }
  if (method == "Remove") {
    auto path = path_field("path");
    if (!path.ok()) return SendRpcError(res, path.status());
    Status removed = node_->io().Remove(t.team, t.id, *path, true);
    return removed.ok() ? SendUnary(res, json::object()) : SendRpcError(res, removed);
  }
  SendRpcError(res, "unimplemented", "filesystem." + method.substr(0, 64) + " is not implemented");
}

// WatchDir on the guest's inotify watch (recursive when asked): every change is reported,
// named relative to the directory, as envd (fsnotify) does. The stream ends when the client
// goes away (a write notices; keepalives make sure one happens), when the directory is
// removed, or when the sandbox stops running; the guest's watch is dropped in every case.
void E2b::WatchDir(api::Request& req, api::Responder& res, const Target& t) {
  ConnectStream out(res);
  auto msg = StreamRequestMessage(req);
  if (!msg.ok()) return out.End(msg.status());
  auto raw = StringField(*msg, "path", 4096);
  if (!raw.ok()) return out.End(raw.status());
  auto dir = ResolvePath(*raw, t.home);
  if (!dir.ok()) return out.End(dir.status());
  bool recursive = msg->contains("recursive") && (*msg)["recursive"].is_boolean() && (*msg)["recursive"].get<bool>();
  bool include_entry =
      msg->contains("includeEntry") && (*msg)["includeEntry"].is_boolean() && (*msg)["includeEntry"].get<bool>();
  auto watch = node_->io().Watch(t.team, t.id, *dir, recursive);
  if (!watch.ok()) return out.End(watch.status());
  struct Closer {
    node::DirWatchStream* w;
    ~Closer() { w->Close(); }
  } closer{watch->get()};
  if (!out.Send({{"start", json::object()}}).ok()) return;
  std::string prefix = dir->back() == '/' ? *dir : *dir + "/";
  for (;;) {
    std::vector<node::DirChange> changes;
    bool overflow = false;
    Status st = (*watch)->Next(&changes, &overflow, kWatchKeepaliveMs);
    if (!st.ok()) return out.End(st);
    // envd has no overflow event; lost changes are only logged (docs/e2b.md).
    if (overflow) LogWarn("e2b", "watch " + *dir + " in " + t.id + ": changes were lost (overflow)");
    if (changes.empty() && !out.Send({{"keepalive", json::object()}}).ok()) return;
    for (const auto& c : changes) {
      json fs = {{"name", c.name}, {"type", EventTypeWord(c.type)}};
      if (include_entry && c.type != node::DirChange::Type::kRemove && c.type != node::DirChange::Type::kRename) {
        // As envd: the entry is read after the event, so it may already be gone.
        auto e = node_->io().Stat(t.team, t.id, prefix + c.name);
        if (e.ok()) fs["entry"] = EntryInfoJson(*e);
      }
      if (!out.Send({{"filesystem", fs}}).ok()) return;
    }
  }
}

}  // namespace space::e2b
