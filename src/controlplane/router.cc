#include "controlplane/router.h"

#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "common/ids.h"
#include "common/log.h"
#include "common/random.h"
#include "console/console.h"
#include "controlplane/node_client.h"
#include "controlplane/preview_relay.h"
#include "controlplane/scheduler.h"
#include "http/scopes.h"
#include "http/team_keys.h"
#include "http/validate.h"
#include "http/websocket.h"

namespace space::controlplane {
namespace {

// A terminal left open without a keystroke or output (the node pings every 50 s).
constexpr int kTerminalIdleMs = 600'000;

bool Alive(const store::NodeRecord& n, int64_t now_ms, int64_t stale_ms) {
  return (n.state == store::NodeState::kReady || n.state == store::NodeState::kDraining) && now_ms - n.heartbeat_at_ms <= stale_ms;
}

nlohmann::json NodeJson(const store::NodeRecord& n) {
  return {{"name", n.name},
          {"url", n.url},
          {"state", store::NodeStateName(n.state)},
          {"capacity", n.capacity},
          {"live", n.live},
          {"templates", n.templates},
          {"heartbeat_at", FormatRfc3339(n.heartbeat_at_ms)},
          {"started_at", FormatRfc3339(n.started_at_ms)}};
}

nlohmann::json JobJson(const store::JobRecord& j) {
  return {{"id", j.id},
          {"kind", j.kind},
          {"target", j.target},
          {"state", store::JobStateName(j.state)},
          {"holder", j.holder},
          {"attempts", j.attempts},
          {"error", j.error.empty() ? nlohmann::json(nullptr) : nlohmann::json(j.error)},
          {"payload", j.payload},
          {"created_at", FormatRfc3339(j.created_at_ms)},
          {"finished_at", j.finished_at_ms ? nlohmann::json(FormatRfc3339(j.finished_at_ms)) : nlohmann::json(nullptr)}};
}

}  // namespace

Router::Router(store::Store* store, api::RateLimit limit, RouterConfig config)
    : store_(store),
      auth_(store, limit),
      config_(std::move(config)),
      previews_(store, config_.preview_domain, config_.stale_ms) {}

void Router::Handle(api::Request& req, api::Responder& res) {
  if (req.path == "/healthz" && req.method == "GET") {
    res.SendJson(200, {{"status", "ok"}, {"role", "server"}});
    return;
  }
  if (previews_.Handle(req, res)) return;  // a preview port's token is checked by its node
  if (console::Serve(req, res)) return;    // static files; the console's data comes from the API
  api::AdoptWebSocketBearer(req);          // the console's terminal offers its key as a subprotocol
  if (auth_.Admit(req, res)) Route(req, res);
}

void Router::Route(api::Request& req, api::Responder& res) {
  auto p = api::SplitPath(req.path);
  const std::string& m = req.method;
  const size_t n = p.size();
  if (const std::string need = api::ScopeFor(m, p); !api::HasScope(req.scopes, need)) {
    return res.SendError(api::MissingScope(need, req));
  }
  if (api::HandleTeamsAndKeys(store_, req, res)) return;  // from the store, like every node
  if (n >= 2 && p[0] == "v1" && (p[1] == "nodes" || p[1] == "jobs")) return Nodes(req, res, p);
  if (n == 0 || (p[0] != "v1" && p[0] != "metrics")) {
    return res.SendError(NotFound("no route for " + m + " " + req.path.substr(0, 256) +
                                  " on a fleet server (the E2B surface is served by nodes)"));
  }
  Result<store::NodeRecord> node = Unavailable("unrouted");
  if (n >= 2 && p[1] == "sandboxes" && n == 2 && m == "POST") {
    // The template decides locality; a body that does not parse is the node's to refuse.
    auto body = nlohmann::json::parse(req.body, nullptr, false);
    std::string tpl = body.is_object() && body.contains("template") && body["template"].is_string()
                          ? body["template"].get<std::string>()
                          : "base";
    node = AnyNode(tpl, /*placing=*/true);
  } else if (n >= 3 && p[1] == "sandboxes") {
    if (!IsPublicId(p[2], "sbx")) return res.SendError(NotFound("sandbox " + p[2].substr(0, 80) + " not found"));
    node = OwnerOf(req, p[2], n == 4 && p[3] == "resume" && m == "POST");
  } else if (n >= 3 && p[1] == "snapshots") {
    auto snap = store_->GetSnapshot(p[2]);
    if (!snap.ok() || snap->team != req.team) {
      return res.SendError(NotFound("snapshot " + p[2].substr(0, 80) + " not found"));
    }
    node = OwnerOf(req, snap->sandbox, false);
  } else if (n == 3 && p[1] == "operations") {
    auto op = store_->GetOperation(p[2]);
    if (!op.ok() || op->team != req.team) {
      return res.SendError(NotFound("operation " + p[2].substr(0, 80) + " not found"));
    }
    node = OwnerOf(req, op->target, false);
    if (!node.ok() && node.status().code() == StatusCode::kNotFound) node = AnyNode("", false);
  } else {
    node = AnyNode("", false);
  }
  if (!node.ok()) return res.SendError(node.status());
  // A terminal's WebSocket: the node answers the handshake; the bytes are relayed raw.
  if (n == 4 && p[1] == "sandboxes" && p[3] == "terminal" && !req.Header("upgrade").empty()) {
    return RelayUpgrade(node->url, req, res, kTerminalIdleMs);
  }
  Relay(*node, req, res);
}

void Router::Relay(const store::NodeRecord& node, api::Request& req, api::Responder& res) {
  Status st = Forward(node.url, req, res);
  if (!st.ok()) {
    LogWarn("router", node.name + ": " + st.ToString());
    res.SendError(Unavailable("node " + node.name + " did not take the request: " + st.message()));
  }
}

Result<store::NodeRecord> Router::OwnerOf(const api::Request& req, const std::string& id, bool resume) {
  auto rec = store_->GetSandbox(id);
  if (!rec.ok() || rec->team != req.team) return NotFound("sandbox " + id.substr(0, 80) + " not found");
  ASSIGN_OR_RETURN(auto nodes, store_->ListNodes());
  ASSIGN_OR_RETURN(const int64_t now, store_->NowMs());
  for (const auto& node : nodes) {
    if (node.name != rec->node || !Alive(node, now, config_.stale_ms)) continue;
    // A suspended sandbox may come back anywhere; its old node only if it still takes work.
    if (resume && rec->state == store::SandboxState::kSuspended && node.state != store::NodeState::kReady) break;
    return node;
  }
  // Its node is gone: a resume places the sandbox anew; anything else is answered from the store.
  return AnyNode(rec->template_name, resume && rec->state == store::SandboxState::kSuspended);
}

Result<store::NodeRecord> Router::AnyNode(const std::string& template_name, bool placing) {
  ASSIGN_OR_RETURN(auto nodes, store_->ListNodes());
  ASSIGN_OR_RETURN(const int64_t now, store_->NowMs());
  std::lock_guard<std::mutex> lock(mu_);
  std::map<std::string, int64_t> placed;
  for (const auto& node : nodes) {
    auto it = placed_.find(node.name);
    if (it != placed_.end() && it->second.first == node.heartbeat_at_ms) placed[node.name] = it->second.second;
  }
  ASSIGN_OR_RETURN(store::NodeRecord pick,
                   PickNode(nodes, {template_name, ""}, now, config_.stale_ms, placed));
  if (!placing) return pick;
  auto& count = placed_[pick.name];
  if (count.first != pick.heartbeat_at_ms) count = {pick.heartbeat_at_ms, 0};
  ++count.second;
  return pick;
}

void Router::Nodes(api::Request& req, api::Responder& res, const std::vector<std::string>& p) {
  if (req.team != config_.admin_team) {
    return res.SendError(PermissionDenied("the fleet's nodes and jobs are for the admin team's keys"));
  }
  const std::string& m = req.method;
  if (p[1] == "jobs") {
    if (p.size() != 2 || m != "GET") return res.SendError(NotFound("no route for " + m + " " + req.path.substr(0, 256)));
    auto jobs = store_->ListJobs(req.Query("target"));
    if (!jobs.ok()) return res.SendError(jobs.status());
    nlohmann::json out = nlohmann::json::array();
    for (const auto& j : *jobs) out.push_back(JobJson(j));
    return res.SendJson(200, {{"jobs", out}});
  }
  auto nodes = store_->ListNodes();
  if (!nodes.ok()) return res.SendError(nodes.status());
  if (p.size() == 2 && m == "GET") {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& node : *nodes) out.push_back(NodeJson(node));
    return res.SendJson(200, {{"nodes", out}});
  }
  if (p.size() != 4 || m != "POST" || (p[3] != "drain" && p[3] != "ready")) {
    return res.SendError(NotFound("no route for " + m + " " + req.path.substr(0, 256)));
  }
  const std::string& name = p[2];
  if (Status st = store_->SetNodeState(name, p[3] == "drain" ? store::NodeState::kDraining : store::NodeState::kReady); !st.ok()) {
    return res.SendError(st);
  }
  if (p[3] == "ready") return res.SendJson(200, {{"node", name}, {"state", "ready"}});
  // One migrate job per sandbox running there: suspend here, resume elsewhere
  // (controllers.h). A sandbox with a pending job already is not queued twice.
  auto live = store_->ListLiveSandboxes();
  if (!live.ok()) return res.SendError(live.status());
  int queued = 0;
  for (const auto& rec : *live) {
    if (rec.node != name || (rec.state != store::SandboxState::kRunning && rec.state != store::SandboxState::kPaused)) continue;
    auto existing = store_->ListJobs(rec.id);
    bool pending = false;
    if (existing.ok()) {
      for (const auto& j : *existing) pending |= j.state == store::JobState::kPending;
    }
    if (pending) continue;
    store::JobRecord job;
    job.id = "job_" + RandomHex(12);
    job.kind = "migrate";
    job.target = rec.id;
    job.team = rec.team;
    job.payload = {{"from", name}};
    job.state = store::JobState::kPending;
    job.created_at_ms = WallNowMs();
    if (Status st = store_->PutJob(job); !st.ok()) return res.SendError(st);
    ++queued;
  }
  res.SendJson(202, {{"node", name}, {"state", "draining"}, {"jobs", queued}});
}

}  // namespace space::controlplane
