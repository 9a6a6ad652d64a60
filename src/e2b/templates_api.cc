// E2B's template build API (the SDK's Template.build), onto TemplateBuilds: request a build
// (POST /v3/templates), an upload link per COPY step (GET /templates/{id}/files/{hash}), the
// upload itself (PUT to that link, authenticated by a token in it, not an API key), the
// trigger with the steps (POST /v2/templates/{id}/builds/{build}) and the status with its
// log (GET /templates/{id}/builds/{build}/status). A template's id is its name, so the
// SDK's later Sandbox.create(name) finds it.
#include <algorithm>

#include "common/clock.h"
#include "common/ids.h"
#include "common/random.h"
#include "e2b/control_errors.h"
#include "e2b/e2b.h"
#include "e2b/template_recipe.h"
#include "http/validate.h"
#include "node/template_start.h"
#include "storage/context_tar.h"
#include "storage/gzip.h"

namespace space::e2b {
namespace {

using nlohmann::json;

constexpr size_t kMaxPendingBuilds = 64;  // requested builds kept (the oldest go first)

bool IsFilesHash(const std::string& s) {
  if (s.size() != 64) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// The Host a client reached us by, for the upload link it is handed back; a header that is
// not a plain host[:port] gets the loopback address.
std::string UploadHost(const api::Request& req) {
  std::string host = req.Header("host");
  const bool plain = !host.empty() && host.size() <= 255 && std::all_of(host.begin(), host.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == ':' || c == '-' || c == '[' || c == ']';
  });
  return plain ? host : "127.0.0.1";
}

json LogEntry(const std::string& level, std::string message) {
  while (!message.empty() && (message.back() == '\n' || message.back() == '\r')) message.pop_back();
  return {{"timestamp", FormatRfc3339(WallNowMs())}, {"level", level}, {"message", message}};
}

// One SPACE build event as one E2B log entry, so logsOffset counts events.
json EntryFor(const node::BuildEvent& e) {
  if (e.name == "log") return LogEntry("info", e.data.value("data", std::string()));
  if (e.name == "step") {
    std::string line = "step " + e.data.value("step", json(0)).dump();
    if (e.data.contains("of")) line += "/" + e.data["of"].dump();
    const std::string kind = e.data.value("kind", std::string());
    if (!kind.empty()) line += " " + kind;
    const std::string state = e.data.value("state", std::string());
    line += ": " + state;
    if (e.data.contains("exit_code") && !e.data["exit_code"].is_null()) {
      line += " (exit code " + e.data["exit_code"].dump() + ")";
    }
    return LogEntry(state == "failed" ? "error" : "info", line);
  }
  if (e.name == "done") {
    return LogEntry("info", "template " + e.data.value("name", std::string()) +
                                " built: " + e.data.value("digest", std::string()) + " (" +
                                e.data.value("steps_run", json(0)).dump() + " steps ran, " +
                                e.data.value("steps_cached", json(0)).dump() + " cached)");
  }
  return LogEntry("error", e.data.value("message", std::string()));
}

}  // namespace

std::string E2b::UploadToken(const std::string& build_id, const std::string& hash) const {
  // A domain of its own: no sandbox id starts with "e2b-upload".
  return AccessToken("e2b-upload:" + build_id + ":" + hash);
}

std::shared_ptr<E2bTemplateBuild> E2b::FindBuild(const std::string& team, const std::string& template_id,
                                                 const std::string& build_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = builds_.find(build_id);
  if (it == builds_.end() || it->second->team != team || it->second->name != template_id) return nullptr;
  return it->second;
}

bool E2b::ControlTemplates(api::Request& req, api::Responder& res, const std::vector<std::string>& p, bool v2) {
  const std::string& m = req.method;
  if (p.size() == 2 && p[0] == "v3" && p[1] == "templates" && m == "POST") {
    RequestTemplateBuild(req, res);
    return true;
  }
  if (p.empty() || p[0] != "templates") return false;
  if (p.size() == 3 && p[1] == "aliases" && m == "GET") {
    TemplateAlias(req, res, p[2]);
    return true;
  }
  if (p.size() == 4 && p[2] == "files" && m == "GET" && !v2) {
    TemplateFileLink(req, res, p[1], p[3]);
    return true;
  }
  if (p.size() == 4 && p[2] == "builds" && m == "POST" && v2) {
    TriggerTemplateBuild(req, res, p[1], p[3]);
    return true;
  }
  if (p.size() == 5 && p[2] == "builds" && p[4] == "status" && m == "GET" && !v2) {
    TemplateBuildStatus(req, res, p[1], p[3]);
    return true;
  }
  return false;
}

void E2b::RequestTemplateBuild(api::Request& req, api::Responder& res) {
  auto body = api::ParseObject(req.body);
  if (!body.ok()) return SendControlError(res, body.status());
  auto name = api::GetString(*body, "name", "", 128);
  if (!name.ok()) return SendControlError(res, name.status());
  if (name->find(':') != std::string::npos) {
    return SendControlError(res, 400,
                            "template tags ('" + name->substr(0, 80) + "') are not supported: name it without ':'");
  }
  if (!api::IsTemplateName(*name)) {
    return SendControlError(res, 400,
                            "template name '" + name->substr(0, 80) + "' must match [a-z0-9][a-z0-9._-]{0,62}");
  }
  auto build = std::make_shared<E2bTemplateBuild>();
  build->team = req.team;
  build->name = *name;
  build->id = NewId("bld");
  {
    std::lock_guard<std::mutex> lock(mu_);
    builds_[build->id] = build;
    build_order_.push_back(build->id);
    while (build_order_.size() > kMaxPendingBuilds) {
      builds_.erase(build_order_.front());
      build_order_.pop_front();
    }
  }
  res.SendJson(202, {{"templateID", build->name},
                     {"buildID", build->id},
                     {"names", {build->name}},
                     {"aliases", {build->name}},
                     {"tags", json::array()},
                     {"public", false}});
}

void E2b::TemplateFileLink(api::Request& req, api::Responder& res, const std::string& template_id,
                           const std::string& hash) {
  if (!IsFilesHash(hash)) return SendControlError(res, 400, "a files hash is 64 lowercase hex digits");
  std::shared_ptr<E2bTemplateBuild> build;
  {
    // The SDK names the template, not the build: its newest requested build of that name.
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = build_order_.rbegin(); it != build_order_.rend() && !build; ++it) {
      auto b = builds_.find(*it);
      if (b != builds_.end() && b->second->team == req.team && b->second->name == template_id) build = b->second;
    }
  }
  if (!build) return SendControlError(res, 404, "no build of template " + template_id.substr(0, 80) + " was requested");
  // Uploads are kept per build, not across builds: every build uploads its files (the layer
  // cache still skips a copy whose files did not change).
  const std::string url = "http://" + UploadHost(req) + "/templates/" + template_id + "/files/" + hash +
                          "?build=" + build->id + "&token=" + UploadToken(build->id, hash);
  res.SendJson(201, {{"present", false}, {"url", url}, {"headers", json::object()}});
}

void E2b::UploadTemplateFiles(api::Request& req, api::Responder& res) {
  auto p = api::SplitPath(req.path);
  const std::string build_id = req.Query("build");
  if (p.size() != 4 || !IsFilesHash(p[3]) || !IsPublicId(build_id, "bld")) {
    return SendControlError(res, 404, "not an upload link");
  }
  const std::string& hash = p[3];
  if (!TokenEquals(req.Query("token"), UploadToken(build_id, hash))) {
    return SendControlError(res, 401, "missing or invalid upload token");
  }
  std::shared_ptr<E2bTemplateBuild> build;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = builds_.find(build_id);
    if (it != builds_.end() && it->second->name == p[1]) build = it->second;
  }
  if (!build) return SendControlError(res, 404, "build " + build_id + " is not pending");
  if (int64_t retry_after_s = auth_->Throttle("team:" + build->team); retry_after_s > 0) {
    res.AddHeader("Retry-After", std::to_string(retry_after_s));
    return SendControlError(res, 429, "rate limit exceeded; retry after " + std::to_string(retry_after_s) + " s");
  }
  // A tar, gzipped by default (the SDK's copy(..., {gzip: false}) sends it plain).
  std::string tar;
  if (storage::IsGzip(req.body)) {
    auto inflated = storage::Inflate(req.body, node::kMaxContextBytes, "the upload");
    if (!inflated.ok()) return SendControlError(res, inflated.status());
    tar = std::move(*inflated);
  } else {
    tar = std::move(req.body);
  }
  if (tar.size() > node::kMaxContextBytes) return SendControlError(res, 413, "the upload is larger than 64 MiB");
  if (Status st = storage::ListTar(tar).status(); !st.ok()) return SendControlError(res, st.Annotate("the upload"));
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!build->op_id.empty()) return SendControlError(res, 409, "build " + build_id + " has started");
    size_t was = build->files.count(hash) ? build->files[hash].size() : 0;
    if (build->bytes - was + tar.size() > node::kMaxContextBytes) {
      return SendControlError(res, 413, "the build's uploads are larger than 64 MiB together");
    }
    build->bytes = build->bytes - was + tar.size();
    build->files[hash] = std::move(tar);
  }
  res.SendJson(200, json::object());
}

void E2b::TriggerTemplateBuild(api::Request& req, api::Responder& res, const std::string& template_id,
                               const std::string& build_id) {
  auto build = FindBuild(req.team, template_id, build_id);
  if (!build) return SendControlError(res, 404, "build " + build_id.substr(0, 80) + " not found");
  auto body = api::ParseObject(req.body);
  if (!body.ok()) return SendControlError(res, body.status());
  auto parent = E2bBuildParent(*body);
  if (!parent.ok()) return SendControlError(res, parent.status());
  E2bBuildTarget target;
  target.team = req.team;
  target.name = build->name;
  if (auto info = node_->templates().Get(*parent); info.ok()) {
    if (auto config = node::ReadTemplateConfig(info->path); config.ok()) {
      target.parent_user = config->user;
      target.parent_workdir = config->workdir;
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!build->op_id.empty()) return SendControlError(res, 409, "build " + build_id + " has started");
    target.files = build->files;
  }
  auto recipe = RecipeFromE2bBuild(*body, target);
  if (!recipe.ok()) return SendControlError(res, recipe.status());
  auto op = node_->template_builds().Build(std::move(*recipe));
  if (!op.ok()) return SendControlError(res, op.status());
  {
    std::lock_guard<std::mutex> lock(mu_);
    build->op_id = op->id;
    build->files.clear();  // the recipe has them now
    build->bytes = 0;
  }
  res.SendJson(202, json::object());
}

void E2b::TemplateBuildStatus(api::Request& req, api::Responder& res, const std::string& template_id,
                              const std::string& build_id) {
  auto build = FindBuild(req.team, template_id, build_id);
  if (!build) return SendControlError(res, 404, "build " + build_id.substr(0, 80) + " not found");
  std::string op_id;
  {
    std::lock_guard<std::mutex> lock(mu_);
    op_id = build->op_id;
  }
  json out = {{"templateID", template_id},
              {"buildID", build_id},
              {"status", "waiting"},
              {"logEntries", json::array()},
              {"logs", json::array()}};
  if (op_id.empty()) return res.SendJson(200, out);
  auto op = node_->lifecycle().GetOperation(req.team, op_id);
  if (!op.ok()) return SendControlError(res, op.status());
  auto log = node_->template_builds().Log(req.team, build->name, op_id);
  if (!log.ok()) return SendControlError(res, log.status());
  // logsOffset counts the entries the client has: one per build event.
  size_t offset = 0;
  if (std::string o = req.Query("logsOffset"); !o.empty()) {
    if (o.size() > 9 || o.find_first_not_of("0123456789") != std::string::npos) {
      return SendControlError(res, 400, "logsOffset must be a count");
    }
    offset = std::stoul(o);
  }
  std::vector<node::BuildEvent> events;
  size_t next = offset;
  (*log)->Follow(&next, &events, 0);
  std::string failed_step;
  for (const auto& e : events) {
    out["logEntries"].push_back(EntryFor(e));
    out["logs"].push_back(out["logEntries"].back()["message"]);
    if (e.name == "step" && e.data.value("state", std::string()) == "failed") failed_step = e.data["step"].dump();
  }
  if (op->state == store::OperationState::kSucceeded) {
    out["status"] = "ready";
  } else if (op->state == store::OperationState::kFailed) {
    out["status"] = "error";
    out["reason"] = {{"message", op->error}};
    if (!failed_step.empty()) out["reason"]["step"] = failed_step;
  } else {
    out["status"] = "building";
  }
  res.SendJson(200, out);
}

void E2b::TemplateAlias(api::Request& req, api::Responder& res, const std::string& name) {
  auto info = api::IsTemplateName(name) ? node_->templates().Get(name) : Result<storage::TemplateInfo>(NotFound(""));
  // Another team's template is not this team's to see (E2B answers 403 for a private one).
  if (!info.ok() || (!info->team.empty() && info->team != req.team)) {
    return SendControlError(res, 404, "template " + name.substr(0, 80) + " not found");
  }
  res.SendJson(200, {{"templateID", name}, {"public", info->team.empty()}});
}

}  // namespace space::e2b
