// envd's filesystem service (filesystem.Filesystem/*) relayed to the guest's file ops.
#include <chrono>
#include <thread>

#include "common/clock.h"
#include "e2b/connect.h"
#include "e2b/e2b.h"
#include "e2b/proto_json.h"
#include "e2b/rpc_request.h"
#include "node/node.h"

namespace space::e2b {
namespace {

using nlohmann::json;

constexpr int64_t kWatchPollMs = 100;
constexpr int64_t kWatchKeepaliveMs = 15000;

std::string OwnerFor(const Target& t) { return t.user == "root" ? "" : t.user; }

// What a watcher remembers about one entry between two polls.
struct Seen {
  std::string type, mtime;
  uint64_t size = 0;
  uint64_t mode = 0;
  json entry;
};

Result<std::map<std::string, Seen>> Snapshot(node::Node* node, const Target& t, const std::string& dir, bool recursive) {
  ASSIGN_OR_RETURN(json listing, node->FileOp(t.team, t.id,
                                              {{"op", "list"}, {"path", dir}, {"depth", recursive ? 8 : 1}}));
  std::map<std::string, Seen> out;
  if (!listing.contains("entries") || !listing["entries"].is_array()) return out;
  for (const auto& e : listing["entries"]) {
    if (!e.is_object() || !e.contains("path") || !e["path"].is_string()) continue;
    Seen s;
    s.type = e.value("type", "");
    s.mtime = e.value("mtime", "");
    s.size = e.contains("size") ? AsUint(e["size"]).value_or(0) : 0;
    s.mode = e.contains("mode") ? AsUint(e["mode"]).value_or(0) : 0;
    s.entry = e;
    out[e["path"].get<std::string>()] = std::move(s);
  }
  return out;
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
    ASSIGN_OR_RETURN(json e, node_->FileOp(t.team, t.id, {{"op", "stat"}, {"path", path}}));
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
    auto listing = node_->FileOp(t.team, t.id, {{"op", "list"}, {"path", *path}, {"depth", depth}});
    if (!listing.ok()) return SendRpcError(res, listing.status());
    json entries = json::array();
    if (listing->contains("entries") && (*listing)["entries"].is_array()) {
      for (const auto& e : (*listing)["entries"]) entries.push_back(EntryInfoJson(e));
    }
    return SendUnary(res, {{"entries", entries}});
  }
  if (method == "MakeDir") {
    auto path = path_field("path");
    if (!path.ok()) return SendRpcError(res, path.status());
    // envd answers already_exists (the SDK returns false); the guest's mkdir is mkdir -p.
    if (stat(*path).ok()) return SendRpcError(res, "already_exists", "directory " + *path + " already exists");
    json op = {{"op", "mkdir"}, {"path", *path}};
    if (!OwnerFor(t).empty()) op["owner"] = OwnerFor(t);
    auto made = node_->FileOp(t.team, t.id, op);
    if (!made.ok()) return SendRpcError(res, made.status());
    auto out = stat(*path);
    return out.ok() ? SendUnary(res, *out) : SendRpcError(res, out.status());
  }
  if (method == "Move") {
    auto from = path_field("source");
    auto to = path_field("destination");
    if (!from.ok()) return SendRpcError(res, from.status());
    if (!to.ok()) return SendRpcError(res, to.status());
    auto moved = node_->FileOp(t.team, t.id, {{"op", "move"}, {"path", *from}, {"to", *to}});
    if (!moved.ok()) return SendRpcError(res, moved.status());
    auto out = stat(*to);
    return out.ok() ? SendUnary(res, *out) : SendRpcError(res, out.status());
  }
  if (method == "Remove") {
    auto path = path_field("path");
    if (!path.ok()) return SendRpcError(res, path.status());
    auto removed = node_->FileOp(t.team, t.id, {{"op", "delete"}, {"path", *path}, {"recursive", true}});
    return removed.ok() ? SendUnary(res, json::object()) : SendRpcError(res, removed.status());
  }
  SendRpcError(res, "unimplemented", "filesystem." + method.substr(0, 64) + " is not implemented");
}

// WatchDir by polling the directory through the guest every 100 ms and reporting the
// differences (docs/e2b.md: events within one interval coalesce, e.g. create+write reads
// as one create). The stream ends when the client goes away, which a write notices.
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
  auto before = Snapshot(node_, t, *dir, recursive);
  if (!before.ok()) return out.End(before.status());
  if (!out.Send({{"start", json::object()}}).ok()) return;
  std::string prefix = dir->back() == '/' ? *dir : *dir + "/";
  int64_t last_write = MonoNowNs();
  for (;;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(kWatchPollMs));
    auto now = Snapshot(node_, t, *dir, recursive);
    if (!now.ok()) {
      // A paused sandbox answers conflict: the watch waits for it to run again.
      if (now.status().code() == StatusCode::kConflict) continue;
      return out.End(now.status());
    }
    std::vector<json> events;
    auto event = [&](const std::string& path, const char* type, const json* entry) {
      json fs = {{"name", path.compare(0, prefix.size(), prefix) == 0 ? path.substr(prefix.size()) : path},
                 {"type", type}};
      if (include_entry && entry != nullptr) fs["entry"] = EntryInfoJson(*entry);
      events.push_back({{"filesystem", fs}});
    };
    for (const auto& [path, s] : *now) {
      auto old = before->find(path);
      if (old == before->end()) {
        event(path, "EVENT_TYPE_CREATE", &s.entry);
      } else if (s.type != "dir" && (old->second.mtime != s.mtime || old->second.size != s.size)) {
        event(path, "EVENT_TYPE_WRITE", &s.entry);
      } else if (old->second.mode != s.mode) {
        event(path, "EVENT_TYPE_CHMOD", &s.entry);
      }
    }
    for (const auto& [path, s] : *before) {
      if (!now->count(path)) event(path, "EVENT_TYPE_REMOVE", nullptr);
    }
    *before = std::move(*now);
    if (events.empty() && MonoNowNs() - last_write > kWatchKeepaliveMs * 1000000) {
      events.push_back({{"keepalive", json::object()}});
    }
    for (const auto& e : events) {
      if (!out.Send(e).ok()) return;
      last_write = MonoNowNs();
    }
  }
}

}  // namespace space::e2b
