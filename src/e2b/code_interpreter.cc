// @e2b/code-interpreter's HTTP API (port 49999: /execute, /contexts) relayed to the
// sandbox's execution service (exec_service.py), which the node starts on first use.
#include "e2b/control_errors.h"
#include "e2b/e2b.h"
#include "e2b/exec_service.h"
#include "e2b/proto_json.h"
#include "http/validate.h"

namespace space::e2b {
namespace {

using nlohmann::json;

// The SDK stops reading after its own timeout (60 s by default); runs longer than this
// are interrupted server-side too.
constexpr int64_t kExecuteTimeoutMs = 3600 * 1000;
constexpr int64_t kContextCallTimeoutMs = 30000;

// Sends the service's error reply as the SDK expects it: 404 -> NotFoundError(body), 502 ->
// TimeoutError, others -> SandboxError("<status> ...").
void SendServiceError(api::Responder& res, const json& error) {
  int status = error.value("status", 500);
  if (status < 400 || status > 599) status = 500;
  res.Send(status, "text/plain", error.value("message", std::string("execution service error")));
}

int ServiceStatus(const Status& st) { return st.code() == StatusCode::kDeadlineExceeded ? 502 : StatusCodeHttp(st.code()); }

}  // namespace

Result<std::shared_ptr<ExecService>> E2b::Service(const Target& t) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = services_.find(t.id);
  if (it != services_.end() && it->second->usable()) return it->second;
  // Services of sandboxes destroyed elsewhere (v1 API, timeout) end; forget them here.
  std::erase_if(services_, [](const auto& kv) { return !kv.second->usable(); });
  // E2B runs code as the default user, whoever asks.
  ASSIGN_OR_RETURN(std::shared_ptr<ExecService> s, ExecService::Start(node_, t.team, t.id, "user"));
  services_[t.id] = s;
  return s;
}

void E2b::CodeInterpreter(api::Request& req, api::Responder& res, const Target& t) {
  auto body = api::ParseObject(req.body);
  if (!body.ok()) return res.Send(400, "text/plain", body.status().message());
  const std::string& p = req.path;
  json call;
  bool execute = false;
  if (p == "/execute" && req.method == "POST") {
    auto code = StringField(*body, "code", 8u << 20);
    auto ctx = StringField(*body, "context_id", 256);
    auto lang = StringField(*body, "language", 64);
    auto envs = StringMapField(*body, "env_vars", 256, 32768);
    for (const Status& st : {code.status(), ctx.status(), lang.status(), envs.status()}) {
      if (!st.ok()) return res.Send(400, "text/plain", st.message());
    }
    call = {{"op", "execute"}, {"code", *code}, {"env_vars", *envs}};
    if (!ctx->empty()) call["context_id"] = *ctx;
    if (!lang->empty()) call["language"] = *lang;
    execute = true;
  } else if (p == "/contexts" && req.method == "POST") {
    auto lang = StringField(*body, "language", 64);
    auto cwd = StringField(*body, "cwd", 4096);
    if (!lang.ok() || !cwd.ok()) return res.Send(400, "text/plain", "language and cwd must be strings");
    call = {{"op", "create_context"}, {"language", lang->empty() ? "python" : *lang}};
    if (!cwd->empty()) {
      auto abs = ResolvePath(*cwd, "/home/user");
      if (!abs.ok()) return res.Send(400, "text/plain", abs.status().message());
      call["cwd"] = *abs;
    }
  } else if (p == "/contexts" && req.method == "GET") {
    call = {{"op", "list_contexts"}};
  } else if (p.rfind("/contexts/", 0) == 0) {
    std::string rest = p.substr(10);
    bool restart = rest.size() > 8 && rest.compare(rest.size() - 8, 8, "/restart") == 0;
    std::string ctx_id = restart ? rest.substr(0, rest.size() - 8) : rest;
    if (ctx_id.empty() || ctx_id.size() > 128 || ctx_id.find('/') != std::string::npos) {
      return res.Send(404, "text/plain", "no such context");
    }
    if (restart && req.method == "POST") {
      call = {{"op", "restart_context"}, {"context_id", ctx_id}};
    } else if (!restart && req.method == "DELETE") {
      call = {{"op", "delete_context"}, {"context_id", ctx_id}};
    } else {
      return res.Send(404, "text/plain", "no route for " + req.method + " " + p.substr(0, 200));
    }
  } else if (p == "/health" && req.method == "GET") {
    return res.Send(204, "text/plain", "");
  } else {
    return res.Send(404, "text/plain", "no route for " + req.method + " " + p.substr(0, 200));
  }

  auto service = Service(t);
  if (!service.ok()) return res.Send(ServiceStatus(service.status()), "text/plain", service.status().message());
  // Output streams as NDJSON as soon as it is printed; the headers go with the first line,
  // so an error that comes before any output still gets its own status.
  bool started = false;
  auto on_msg = [&](const json& msg) {
    if (!started) {
      if (!res.StartStream(200, "application/json").ok()) return false;
      started = true;
    }
    return res.Write(msg.dump(-1, ' ', false, json::error_handler_t::replace) + "\n").ok();
  };
  auto reply = (*service)->Call(call, on_msg, execute ? kExecuteTimeoutMs : kContextCallTimeoutMs);
  if (!reply.ok()) {
    if (!started) return res.Send(ServiceStatus(reply.status()), "text/plain", reply.status().message());
    (void)res.Write(json{{"type", "error"}, {"name", "ServiceError"}, {"value", reply.status().message()},
                         {"traceback", ""}}.dump() + "\n");
    return;
  }
  if (reply->contains("error") && (*reply)["error"].is_object()) {
    if (!started) return SendServiceError(res, (*reply)["error"]);
    return;
  }
  if (execute) {
    if (!started) res.Send(200, "application/json", "");
    return;
  }
  if (reply->contains("result")) return res.SendJson(200, (*reply)["result"]);
  res.Send(204, "text/plain", "");
}

}  // namespace space::e2b
