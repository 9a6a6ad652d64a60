// Api: the v1 REST + SSE surface (docs/openapi.yaml). Authenticates each request, parses it into a
// typed call on the Node, and renders the result. Parsing only: no lifecycle logic here.
// Thread-safe (handlers run on many connection threads).
#pragma once

#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "http/authenticator.h"
#include "http/http.h"
#include "http/rate_limiter.h"
#include "node/node.h"

namespace space::api {

class Api {
 public:
  // `limit` applies per API key; lookups of keys not seen before share one bucket of the same
  // size, so guessing keys cannot turn into unbounded store queries. `fleet_token`: the
  // secret fleet servers present to act for a team (authenticator.h); "" outside a fleet.
  explicit Api(node::Node* node, RateLimit limit = {}, std::string fleet_token = "")
      : node_(node), auth_(node->store(), limit, std::move(fleet_token)) {}

  // Entry point for the HTTP server.
  void Handle(Request& req, Responder& res);

  // Its key check and rate limits, for the E2B surface on the same listener.
  Authenticator* authenticator() { return &auth_; }

  // Creates the first admin key when none exists: writes it to `key_path` (0600) and stores
  // its hash. Returns the key path (existing or new).
  static Status EnsureAdminKey(store::Store* store, const std::string& key_path);

 private:
  void Route(Request& req, Responder& res);

  // Sandboxes (api_sandboxes.cc)
  void CreateSandbox(Request& req, Responder& res);
  void ListSandboxes(Request& req, Responder& res);
  void GetSandbox(Request& req, Responder& res, const std::string& id);
  void DeleteSandbox(Request& req, Responder& res, const std::string& id);
  void SetTimeout(Request& req, Responder& res, const std::string& id);
  void GetOperation(Request& req, Responder& res, const std::string& id);
  void ListAudit(Request& req, Responder& res);
  void Templates(Request& req, Responder& res, const std::string& name);
  // Templates from a recipe (api_templates.cc)
  void BuildTemplateFromRecipe(Request& req, Responder& res);
  void TemplateBuildLogs(Request& req, Responder& res, const std::string& name, const std::string& op_id);
  void DeleteTemplate(Request& req, Responder& res, const std::string& name);
  void ImportTemplateImage(Request& req, Responder& res);
  void CollectTemplateLayers(Request& req, Responder& res);
  void Metrics(Request& req, Responder& res);
  // Lifecycle (api_lifecycle.cc)
  void Lifecycle(Request& req, Responder& res, const std::string& id, const std::string& action);
  void Snapshots(Request& req, Responder& res, const std::string& snap_id, const std::string& action);
  // Resumes a paused sandbox first when the caller asked for ?auto_resume=true.
  Status AutoResume(Request& req, const std::string& id);
  // Credentials and egress profiles (api_credentials.cc)
  void Credentials(Request& req, Responder& res, const std::string& name);
  void EgressProfiles(Request& req, Responder& res, const std::string& name);
  // Processes (api_processes.cc)
  void Exec(Request& req, Responder& res, const std::string& id);
  void StartProcess(Request& req, Responder& res, const std::string& id);
  void ListProcesses(Request& req, Responder& res, const std::string& id);
  void ProcessCall(Request& req, Responder& res, const std::string& id, const std::string& pid,
                   const std::string& action);
  void Commands(Request& req, Responder& res, const std::string& id);
  // Files (api_files.cc)
  void Files(Request& req, Responder& res, const std::string& id, const std::string& action);
  // The terminal WebSocket (api_terminal.cc).
  void Terminal(Request& req, Responder& res, const std::string& id);
  // Preview ports (api_ports.cc); `port` is "" for the collection.
  void Ports(Request& req, Responder& res, const std::string& id, const std::string& port);
  // Volumes (api_volumes.cc); `name` is "" for the collection, `action` "fork" or "".
  void Volumes(Request& req, Responder& res, const std::string& name, const std::string& action);

  node::Node* const node_;
  Authenticator auth_;
};

// JSON renderings shared by handlers.
nlohmann::json SandboxJson(const store::Sandbox& r);
nlohmann::json OperationJson(const store::OperationRecord& r);
nlohmann::json SnapshotJson(const store::SnapshotRecord& r);
nlohmann::json TemplateJson(const storage::TemplateInfo& t);

}  // namespace space::api
