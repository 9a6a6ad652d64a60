// E2b: the E2B-compatible surface served on SPACE's listener, so the unmodified E2B SDKs
// drive SPACE (docs/e2b.md). Three parts, told apart per request:
//   - control API (/v2/sandboxes, /sandboxes/{id}/...): X-API-KEY, E2B's JSON error bodies;
//   - envd (header E2b-Sandbox-Id, port 49983): Connect RPC process/filesystem services,
//     /files, /health, relayed to the sandbox's guest through the Node;
//   - code interpreter (port 49999): runCode against a Python execution service the node
//     starts inside the sandbox.
// Clients never reach anything inside the sandbox directly: every call goes through Node.
//
// Owned by `space dev`, next to api::Api. Thread-safe: handlers run on many HTTP threads.
#pragma once

#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "http/authenticator.h"
#include "http/http.h"
#include "node/node.h"

namespace space::e2b {

class ExecService;

// Constant-time comparison of a presented token with the expected one (false when empty).
bool TokenEquals(const std::string& got, const std::string& want);

// A template build the SDK requested (POST /v3/templates) and is uploading files for or has
// started (templates_api.cc).
struct E2bTemplateBuild {
  std::string team;
  std::string name;                          // the template, which is also its E2B templateID
  std::string id;                            // "bld_..."
  std::map<std::string, std::string> files;  // a COPY step's filesHash -> its tarball, inflated
  size_t bytes = 0;                          // of files, at most node::kMaxContextBytes
  std::string op_id;                         // the template_build operation, once triggered
};

// The envd version reported to the SDK. The SDK gates features on it (reference §3.6);
// 0.6.4 turns on everything this server implements.
inline constexpr char kEnvdVersion[] = "0.6.4";
inline constexpr uint16_t kEnvdPort = 49983;
inline constexpr uint16_t kCodeInterpreterPort = 49999;

// The sandbox an envd or code-interpreter request is for, once its token checked out.
struct Target {
  std::string team;
  std::string id;
  std::string user;  // from "Authorization: Basic base64(user:)", default "user"
  std::string home;  // that user's home, for relative paths
};

class E2b {
 public:
  // `secret_path` holds the key access tokens are derived from (created 0600 if missing).
  // `auth` checks API keys and rate limits, shared with SPACE's own API (not owned).
  E2b(node::Node* node, api::Authenticator* auth, std::string secret_path);
  ~E2b();
  Status Init();

  // True for requests this surface answers: any with E2b-Sandbox-Id, and the control-API
  // paths (which never start with /v1, so they cannot shadow SPACE's own API).
  static bool Handles(const api::Request& req);
  void Handle(api::Request& req, api::Responder& res);

  // The per-sandbox access token (envdAccessToken and trafficAccessToken): HMAC of the id.
  std::string AccessToken(const std::string& sandbox_id) const;

 private:
  Status AuthenticateApiKey(api::Request& req, int64_t* retry_after_s);
  Result<Target> ResolveTarget(const api::Request& req, bool code_interpreter);

  // Control API (control_api.cc).
  void Control(api::Request& req, api::Responder& res);
  void CreateSandbox(api::Request& req, api::Responder& res);
  void ConnectSandbox(api::Request& req, api::Responder& res, const std::string& id);
  void ListSandboxes(api::Request& req, api::Responder& res);
  void GetSandbox(api::Request& req, api::Responder& res, const std::string& id);
  void KillSandbox(api::Request& req, api::Responder& res, const std::string& id);
  void SetTimeout(api::Request& req, api::Responder& res, const std::string& id);
  void PauseSandbox(api::Request& req, api::Responder& res, const std::string& id);
  void Metrics(api::Request& req, api::Responder& res, const std::string& id);
  nlohmann::json SandboxJson(const store::Sandbox& r) const;
  std::string PreviewDomain() const;

  // envd (envd_process.cc, envd_filesystem.cc, envd_files.cc).
  void Envd(api::Request& req, api::Responder& res, const Target& t);
  void ProcessRpc(api::Request& req, api::Responder& res, const Target& t, const std::string& method);
  void FilesystemRpc(api::Request& req, api::Responder& res, const Target& t, const std::string& method);
  void WatchDir(api::Request& req, api::Responder& res, const Target& t);
  void FilesDownload(api::Request& req, api::Responder& res, const Target& t);
  void FilesUpload(api::Request& req, api::Responder& res, const Target& t);

  // Template builds (templates_api.cc). ControlTemplates answers the paths that are its own.
  bool ControlTemplates(api::Request& req, api::Responder& res, const std::vector<std::string>& parts, bool v2);
  void RequestTemplateBuild(api::Request& req, api::Responder& res);
  void TemplateFileLink(api::Request& req, api::Responder& res, const std::string& template_id,
                        const std::string& hash);
  void UploadTemplateFiles(api::Request& req, api::Responder& res);
  void TriggerTemplateBuild(api::Request& req, api::Responder& res, const std::string& template_id,
                            const std::string& build_id);
  void TemplateBuildStatus(api::Request& req, api::Responder& res, const std::string& template_id,
                           const std::string& build_id);
  void TemplateAlias(api::Request& req, api::Responder& res, const std::string& name);
  std::shared_ptr<E2bTemplateBuild> FindBuild(const std::string& team, const std::string& template_id,
                                              const std::string& build_id);
  std::string UploadToken(const std::string& build_id, const std::string& hash) const;

  // Code interpreter (code_interpreter.cc).
  void CodeInterpreter(api::Request& req, api::Responder& res, const Target& t);
  Result<std::shared_ptr<ExecService>> Service(const Target& t);

  node::Node* const node_;
  api::Authenticator* const auth_;
  const std::string secret_path_;
  std::string secret_;  // set once by Init

  std::mutex mu_;
  std::map<std::string, std::string> tags_;       // proc id -> E2B tag; GUARDED_BY(mu_)
  std::map<std::string, std::shared_ptr<ExecService>> services_;  // sandbox -> service; GUARDED_BY(mu_)
  std::map<std::string, std::shared_ptr<E2bTemplateBuild>> builds_;  // by build id; GUARDED_BY(mu_)
  std::deque<std::string> build_order_;                              // oldest first; GUARDED_BY(mu_)
};

}  // namespace space::e2b
