// Routing, authentication and access tokens of the E2B surface.
#include "e2b/e2b.h"

#include <openssl/crypto.h>

#include "common/base64.h"
#include "common/hmac.h"
#include "common/ids.h"
#include "common/random.h"
#include "common/syscall.h"
#include "e2b/connect.h"
#include "e2b/control_errors.h"
#include "e2b/exec_service.h"
#include "http/scopes.h"
#include "http/validate.h"

namespace space::e2b {
namespace {

bool StartsWith(const std::string& s, std::string_view p) { return s.compare(0, p.size(), p) == 0; }

bool IsRpcPath(const std::string& path) {
  return StartsWith(path, "/process.Process/") || StartsWith(path, "/filesystem.Filesystem/");
}

// "Basic base64(user:)" -> user; absent -> the E2B default "user".
Result<std::string> RequestUser(const api::Request& req) {
  std::string auth = req.Header("authorization");
  if (auth.empty()) return std::string("user");
  constexpr std::string_view kBasic = "Basic ";
  if (!StartsWith(auth, kBasic) || auth.size() > 512) return InvalidArgument("Authorization must be 'Basic <user:>'");
  ASSIGN_OR_RETURN(std::string decoded, Base64Decode(std::string_view(auth).substr(kBasic.size())));
  std::string user = decoded.substr(0, decoded.find(':'));
  if (user.empty()) return std::string("user");
  if (!api::IsUserName(user)) return InvalidArgument("user '" + user.substr(0, 64) + "' is not a valid user name");
  return user;
}

}  // namespace

bool TokenEquals(const std::string& got, const std::string& want) {
  return !got.empty() && got.size() == want.size() && CRYPTO_memcmp(got.data(), want.data(), want.size()) == 0;
}

E2b::E2b(node::Node* node, api::Authenticator* auth, std::string secret_path)
    : node_(node), auth_(auth), secret_path_(std::move(secret_path)) {}

E2b::~E2b() = default;

Status E2b::Init() {
  auto existing = ReadFileToString(secret_path_, 4096);
  if (existing.ok() && existing->size() >= 64) {
    secret_ = existing->substr(0, 64);
    return Status::Ok();
  }
  secret_ = RandomHex(32);
  return WriteFileAtomic(secret_path_, secret_ + "\n", 0600);
}

std::string E2b::AccessToken(const std::string& sandbox_id) const { return HmacSha256Hex(secret_, sandbox_id); }

bool E2b::Handles(const api::Request& req) {
  if (req.headers.count("e2b-sandbox-id")) return true;
  const std::string& p = req.path;
  return p == "/sandboxes" || StartsWith(p, "/sandboxes/") || p == "/v2/sandboxes" || StartsWith(p, "/v2/sandboxes/") ||
         p == "/snapshots" || StartsWith(p, "/templates/") || p == "/v3/templates" || StartsWith(p, "/v2/templates/") ||
         IsRpcPath(p);
}

Status E2b::AuthenticateApiKey(api::Request& req, int64_t* retry_after_s) {
  std::string key = req.Header("x-api-key");
  if (key.empty()) {
    // SPACE's own header works too, so one key style serves both surfaces.
    std::string auth = req.Header("authorization");
    if (StartsWith(auth, "Bearer ")) key = auth.substr(7);
  }
  if (key.empty()) return Unauthenticated("missing X-API-KEY header");
  // The same digests, constant-time cache and per-key rate limit as SPACE's API.
  RETURN_IF_ERROR(auth_->AuthenticateKey(key, req, retry_after_s));
  // The E2B surface makes and drives sandboxes (and builds templates): a read-only key has no
  // part in it.
  if (!api::HasScope(req.scopes, "sandboxes:write")) return api::MissingScope("sandboxes:write", req);
  return Status::Ok();
}

Result<Target> E2b::ResolveTarget(const api::Request& req, bool code_interpreter) {
  std::string id = req.Header("e2b-sandbox-id");
  if (!IsPublicId(id, "sbx")) return NotFound("sandbox " + id.substr(0, 80) + " not found");
  auto rec = node_->store()->GetSandbox(id);
  if (!rec.ok() || rec->state == store::SandboxState::kDestroyed) return NotFound("sandbox " + id + " not found");
  // The token proves the caller got this sandbox from the control API: envd calls carry it
  // as X-Access-Token, the code interpreter's as E2B-Traffic-Access-Token.
  std::string want = AccessToken(id);
  bool ok = TokenEquals(req.Header("x-access-token"), want) ||
            (code_interpreter && TokenEquals(req.Header("e2b-traffic-access-token"), want));
  bool health = req.path == "/health" && req.method == "GET";
  if (!ok && !health) return Unauthenticated("missing or invalid access token for sandbox " + id);
  if (rec->state != store::SandboxState::kRunning) return Unavailable("sandbox " + id + " is " + std::string(store::StateName(rec->state)));
  Target t;
  t.team = rec->team;
  t.id = id;
  ASSIGN_OR_RETURN(t.user, RequestUser(req));
  t.home = t.user == "root" || t.user == "0" ? "/root" : "/home/" + t.user;
  return t;
}

void E2b::Handle(api::Request& req, api::Responder& res) {
  if (!req.headers.count("e2b-sandbox-id")) {
    if (IsRpcPath(req.path)) return SendRpcError(res, "invalid_argument", "missing E2b-Sandbox-Id header");
    // A template file upload carries its own token (the link GET /templates/{id}/files/{hash}
    // handed out), never an API key: the SDK sends none with it.
    if (req.method == "PUT" && StartsWith(req.path, "/templates/")) return UploadTemplateFiles(req, res);
    int64_t retry_after_s = 0;
    if (Status st = AuthenticateApiKey(req, &retry_after_s); !st.ok()) {
      if (retry_after_s > 0) res.AddHeader("Retry-After", std::to_string(retry_after_s));
      return SendControlError(res, st);
    }
    return Control(req, res);
  }
  std::string port = req.Header("e2b-sandbox-port");
  bool ci = port == std::to_string(kCodeInterpreterPort);
  if (!ci && !port.empty() && port != std::to_string(kEnvdPort)) {
    return res.Send(502, "text/plain", "SPACE serves only ports 49983 (envd) and 49999 (code interpreter)\n");
  }
  auto t = ResolveTarget(req, ci);
  if (!t.ok()) {
    const Status& st = t.status();
    // E2B's edge answers 502 for a sandbox that is not running; the SDK reads that as
    // "not running" (isRunning() -> false).
    if (st.code() == StatusCode::kNotFound || st.code() == StatusCode::kUnavailable) {
      return res.Send(502, "text/plain", st.message() + "\n");
    }
    if (IsRpcPath(req.path)) return SendRpcError(res, st);
    return SendControlError(res, st);
  }
  // The access token authenticates these; each sandbox gets the per-key rate limit's share.
  if (int64_t retry_after_s = auth_->Throttle("sandbox:" + t->id); retry_after_s > 0) {
    Status st = ResourceExhausted("rate limit for sandbox " + t->id + " exceeded; retry after " +
                                  std::to_string(retry_after_s) + " s");
    res.AddHeader("Retry-After", std::to_string(retry_after_s));
    if (IsRpcPath(req.path)) return SendRpcError(res, st);
    return SendControlError(res, st);
  }
  if (ci) return CodeInterpreter(req, res, *t);
  Envd(req, res, *t);
}

void E2b::Envd(api::Request& req, api::Responder& res, const Target& t) {
  const std::string& p = req.path;
  if (p == "/health" && req.method == "GET") return res.Send(204, "text/plain", "");
  if (p == "/files") {
    if (req.method == "GET") return FilesDownload(req, res, t);
    if (req.method == "POST") return FilesUpload(req, res, t);
    return SendControlError(res, InvalidArgument("method " + req.method + " not allowed on /files"));
  }
  if (req.method == "POST" && StartsWith(p, "/process.Process/")) return ProcessRpc(req, res, t, p.substr(17));
  if (req.method == "POST" && StartsWith(p, "/filesystem.Filesystem/")) return FilesystemRpc(req, res, t, p.substr(23));
  SendControlError(res, NotFound("no envd route for " + req.method + " " + p.substr(0, 200)));
}

}  // namespace space::e2b
