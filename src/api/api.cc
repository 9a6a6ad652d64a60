// Authentication and routing.
#include "api/api.h"

#include <vector>

#include "common/clock.h"
#include "common/ids.h"
#include "common/random.h"
#include "common/syscall.h"
#include "console/console.h"
#include "http/scopes.h"
#include "http/team_keys.h"
#include "http/validate.h"
#include "http/websocket.h"

namespace space::api {

nlohmann::json SandboxJson(const store::Sandbox& r) {
  nlohmann::json j = {{"id", r.id},
                      {"state", store::StateName(r.state)},
                      {"template", r.template_name},
                      {"template_digest", r.template_digest},
                      {"runtime", store::RuntimeName(r.runtime)},
                      {"team", r.team},
                      {"node", r.node},
                      {"created_at", FormatRfc3339(r.created_at_ms)},
                      {"expires_at", FormatRfc3339(r.expires_at_ms)},
                      {"timeout_s", r.timeout_s},
                      {"on_timeout", store::OnTimeoutName(r.on_timeout)},
                      {"metadata", r.metadata},
                      {"egress_profiles", r.EgressProfileNames()},
                      {"resources", r.resources.ToJson()},
                      {"timings", r.timings},
                      {"snapshot_policy", r.policy.ToJson()},
                      {"head_snapshot", r.head_snapshot.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.head_snapshot)}};
  if (!r.error.empty()) j["error"] = r.error;
  return j;
}

nlohmann::json SnapshotJson(const store::SnapshotRecord& r) {
  return {{"id", r.id},
          {"sandbox", r.sandbox},
          {"parent", r.parent.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.parent)},
          {"label", r.label},
          {"kind", r.kind},
          {"state", store::SnapshotStateName(r.state)},
          {"size_bytes", r.size_bytes},
          {"created_at", FormatRfc3339(r.created_at_ms)}};
}

nlohmann::json OperationJson(const store::OperationRecord& r) {
  nlohmann::json j = {{"id", r.id},         {"kind", r.kind},
                      {"target", r.target}, {"state", store::OperationStateName(r.state)},
                      {"error", r.error.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.error)},
                      {"created_at", FormatRfc3339(r.created_at_ms)},
                      {"finished_at", r.finished_at_ms ? nlohmann::json(FormatRfc3339(r.finished_at_ms)) : nlohmann::json(nullptr)}};
  return j;
}

Status Api::EnsureAdminKey(store::Store* store, const std::string& key_path) {
  auto existing = ReadFileToString(key_path, 4096);
  if (existing.ok()) {
    std::string key = *existing;
    while (!key.empty() && (key.back() == '\n' || key.back() == ' ')) key.pop_back();
    if (!key.empty()) return store->PutApiKey(KeyDigest(key), "default", "admin");
  }
  std::string key = "space_" + RandomHex(24);
  RETURN_IF_ERROR(WriteFileAtomic(key_path, key + "\n", 0600));
  return store->PutApiKey(KeyDigest(key), "default", "admin");
}

void Api::Handle(Request& req, Responder& res) {
  if (req.path == "/healthz" && req.method == "GET") {
    res.SendJson(200, {{"status", "ok"}});
    return;
  }
  if (console::Serve(req, res)) return;  // static files only: the data it shows comes from the API
  // A browser's WebSocket cannot send Authorization: the console offers its key as a
  // subprotocol instead (space.bearer.<base64url key>), which no answer ever echoes.
  AdoptWebSocketBearer(req);
  if (auth_.Admit(req, res)) Route(req, res);
}

void Api::Route(Request& req, Responder& res) {
  auto p = SplitPath(req.path);
  const std::string& m = req.method;
  auto not_found = [&] { res.SendError(NotFound("no route for " + m + " " + req.path.substr(0, 256))); };
  if (p.empty() || (p[0] != "v1" && !(p.size() == 1 && p[0] == "metrics"))) return not_found();
  if (const std::string need = ScopeFor(m, p); !HasScope(req.scopes, need))
    return res.SendError(MissingScope(need, req));
  if (HandleTeamsAndKeys(node_->store(), req, res)) return;
  if (p[0] == "metrics") return m == "GET" ? Metrics(req, res) : not_found();
  size_t n = p.size();
  if (n >= 2 && p[1] == "sandboxes") {
    if (n == 2) {
      if (m == "POST") return CreateSandbox(req, res);
      if (m == "GET") return ListSandboxes(req, res);
      return not_found();
    }
    const std::string& id = p[2];
    if (!IsPublicId(id, "sbx")) return res.SendError(NotFound("sandbox " + id.substr(0, 80) + " not found"));
    if (n == 3) {
      if (m == "GET") return GetSandbox(req, res, id);
      if (m == "DELETE") return DeleteSandbox(req, res, id);
      return not_found();
    }
    const std::string& sub = p[3];
    if (n == 4 && m == "POST" && sub == "timeout") return SetTimeout(req, res, id);
    if (n == 4 && m == "POST" && sub == "exec") return Exec(req, res, id);
    if (n == 4 && m == "GET" && sub == "commands") return Commands(req, res, id);
    if (n == 4 && m == "GET" && sub == "terminal") return Terminal(req, res, id);
    if (n == 4 && m == "POST" && (sub == "pause" || sub == "resume" || sub == "suspend" || sub == "snapshots" ||
                                  sub == "fork" || sub == "rollback")) {
      return Lifecycle(req, res, id, sub);
    }
    if (n == 4 && m == "GET" && sub == "snapshots") return Lifecycle(req, res, id, "list_snapshots");
    if (sub == "processes") {
      if (n == 4 && m == "POST") return StartProcess(req, res, id);
      if (n == 4 && m == "GET") return ListProcesses(req, res, id);
      if (n == 5 && m == "GET") return ProcessCall(req, res, id, p[4], "get");
      if (n == 6 && m == "GET" && p[5] == "output") return ProcessCall(req, res, id, p[4], "output");
      if (n == 6 && m == "POST" && (p[5] == "stdin" || p[5] == "signal")) return ProcessCall(req, res, id, p[4], p[5]);
      return not_found();
    }
    if (sub == "ports" && n <= 5) return Ports(req, res, id, n == 5 ? p[4] : "");
    if (sub == "files") {
      if (n == 4) return Files(req, res, id, m == "GET" ? "read" : m == "PUT" ? "write" : m == "DELETE" ? "delete" : "");
      if (n == 5 && m == "GET" && (p[4] == "list" || p[4] == "stat")) return Files(req, res, id, p[4]);
      if (n == 5 && m == "POST" && (p[4] == "mkdir" || p[4] == "move")) return Files(req, res, id, p[4]);
      return not_found();
    }
    return not_found();
  }
  if (n >= 3 && p[1] == "snapshots") {
    if (!IsPublicId(p[2], "snap")) return res.SendError(NotFound("snapshot " + p[2].substr(0, 80) + " not found"));
    if (n == 3 && m == "GET") return Snapshots(req, res, p[2], "get");
    if (n == 3 && m == "DELETE") return Snapshots(req, res, p[2], "delete");
    if (n == 4 && m == "GET" && p[3] == "diff") return Snapshots(req, res, p[2], "diff");
    return not_found();
  }
  if (n >= 2 && n <= 4 && p[1] == "volumes") return Volumes(req, res, n >= 3 ? p[2] : "", n == 4 ? p[3] : "");
  if (n <= 3 && n >= 2 && p[1] == "credentials") return Credentials(req, res, n == 3 ? p[2] : "");
  if (n <= 3 && n >= 2 && p[1] == "egress-profiles") return EgressProfiles(req, res, n == 3 ? p[2] : "");
  if (n == 3 && p[1] == "operations" && m == "GET") return GetOperation(req, res, p[2]);
  if (n == 2 && p[1] == "audit" && m == "GET") return ListAudit(req, res);
  if (n == 6 && p[1] == "templates" && p[3] == "builds" && p[5] == "logs" && m == "GET") {
    return TemplateBuildLogs(req, res, p[2], p[4]);
  }
  if (n == 3 && p[1] == "templates" && m == "DELETE") return DeleteTemplate(req, res, p[2]);
  if (n == 3 && p[1] == "templates" && p[2] == "import" && m == "POST") return ImportTemplateImage(req, res);
  if (n == 3 && p[1] == "templates" && p[2] == "gc" && m == "POST") return CollectTemplateLayers(req, res);
  if (p.size() >= 2 && p[1] == "templates" && n <= 3) return Templates(req, res, n == 3 ? p[2] : "");
  return not_found();
}

}  // namespace space::api
