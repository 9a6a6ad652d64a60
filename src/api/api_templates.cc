// Templates from a recipe: builds, their logs, removal.
#include <nlohmann/json.hpp>

#include "api/api.h"
#include "api/recipe_request.h"
#include "common/clock.h"
#include "common/ids.h"
#include "common/log.h"
#include "http/validate.h"

namespace space::api {
namespace {

constexpr int64_t kBuildWaitMs = 30 * 60 * 1000;
constexpr int64_t kFollowMs = 15000;

bool QueryTrue(const Request& req, const std::string& name) {
  return req.Query(name) == "true" || req.Query(name) == "1";
}

std::string Sse(const node::BuildEvent& e) {
  return "event: " + e.name + "\ndata: " + e.data.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) +
         "\n\n";
}

// The plain-text rendering: output as printed, a line per step change.
std::string PlainText(const node::BuildEvent& e) {
  if (e.name == "log") return e.data.value("data", std::string());
  if (e.name == "step") {
    std::string line = "--- step " + e.data.value("step", nlohmann::json(0)).dump();
    if (e.data.contains("of")) line += "/" + e.data["of"].dump();
    if (e.data.contains("kind") && !e.data["kind"].get<std::string>().empty())
      line += " " + e.data["kind"].get<std::string>();
    line += ": " + e.data.value("state", std::string());
    if (e.data.contains("digest")) line += " " + e.data["digest"].get<std::string>();
    if (e.data.contains("exit_code") && !e.data["exit_code"].is_null())
      line += " (exit code " + e.data["exit_code"].dump() + ")";
    return line + "\n";
  }
  if (e.name == "done") return "--- done: " + e.data.dump() + "\n";
  return "--- error: " + e.data.value("message", std::string()) + "\n";
}

}  // namespace

void Api::BuildTemplateFromRecipe(Request& req, Responder& res) {
  auto recipe = ParseRecipeRequest(req);
  if (!recipe.ok()) return res.SendError(recipe.status());
  const std::string name = recipe->name;
  auto op = node_->template_builds().Build(std::move(*recipe));
  if (!op.ok()) return res.SendError(op.status());
  nlohmann::json tmpl = {{"name", name}};
  if (!QueryTrue(req, "wait")) return res.SendJson(202, {{"template", tmpl}, {"operation", OperationJson(*op)}});
  auto done = node_->lifecycle().WaitOperation(req.team, op->id, kBuildWaitMs);
  if (!done.ok()) return res.SendError(done.status());
  if (done->state == store::OperationState::kSucceeded) {
    auto t = node_->templates().Get(name);
    if (!t.ok()) return res.SendError(t.status());
    return res.SendJson(201, {{"template", TemplateJson(*t)}, {"operation", OperationJson(*done)}});
  }
  if (done->state == store::OperationState::kFailed) {
    return res.SendJson(400, {{"code", "invalid_argument"},
                              {"message", "template " + name + " failed to build: " + done->error},
                              {"operation", OperationJson(*done)}});
  }
  res.SendJson(202, {{"template", tmpl}, {"operation", OperationJson(*done)}});
}

void Api::TemplateBuildLogs(Request& req, Responder& res, const std::string& name, const std::string& op_id) {
  if (!IsTemplateName(name) || !IsPublicId(op_id, "op")) return res.SendError(NotFound("build not found"));
  auto log = node_->template_builds().Log(req.team, name, op_id);
  if (!log.ok()) return res.SendError(log.status());
  const bool sse = req.Header("accept").find("text/event-stream") != std::string::npos;
  if (!res.StartStream(200, sse ? "text/event-stream" : "text/plain; charset=utf-8").ok()) return;
  size_t next = 0;
  std::vector<node::BuildEvent> events;
  for (bool more = true; more;) {
    events.clear();
    more = (*log)->Follow(&next, &events, kFollowMs);
    std::string out;
    for (const auto& e : events) out += sse ? Sse(e) : PlainText(e);
    if (out.empty() && sse) out = ": keep-alive\n\n";
    if (!out.empty() && !res.Write(out).ok()) return;  // the client went away
  }
}

void Api::DeleteTemplate(Request& req, Responder& res, const std::string& name) {
  if (!IsTemplateName(name)) return res.SendError(NotFound("template not found"));
  Status st = node_->template_builds().Remove(req.team, name, QueryTrue(req, "force"));
  if (!st.ok()) return res.SendError(st);
  res.Send(204, "application/json", "");
}

void Api::CollectTemplateLayers(Request& req, Responder& res) {
  // Every team's cached layers go: the admin's call.
  if (req.team != "default") return res.SendError(PermissionDenied("only the admin team may collect template layers"));
  auto removed = node_->template_builds().CollectLayers();
  if (!removed.ok()) return res.SendError(removed.status());
  res.SendJson(200, {{"layers_removed", *removed}});
}

void Api::ImportTemplateImage(Request& req, Responder& res) {
  // Admin only, as imports from the server's filesystem: an imported tree is trusted as much
  // as whoever may replace a template of that name.
  if (req.team != "default") return res.SendError(PermissionDenied("only the admin team may import images"));
  const std::string name = req.Query("name");
  if (!IsTemplateName(name)) return res.SendError(InvalidArgument("?name= must match [a-z0-9][a-z0-9._-]{0,62}"));
  if (req.body.empty())
    return res.SendError(InvalidArgument("the body must be an OCI image layout or docker save tarball"));
  auto t = node_->templates().ImportImage(name, req.body,
                                          [&](const std::string& line) { LogInfo("template " + name, line); });
  if (!t.ok()) return res.SendError(t.status());
  res.SendJson(201, TemplateJson(*t));
}

}  // namespace space::api
