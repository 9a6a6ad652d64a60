// Sandboxes, operations, audit, templates and metrics.
#include <nlohmann/json.hpp>

#include <algorithm>

#include "api/api.h"
#include "api/recipe_request.h"
#include "common/clock.h"
#include "common/ids.h"
#include "common/log.h"
#include "http/validate.h"

namespace space::api {
namespace {

constexpr int64_t kWaitMs = 180000;           // ?wait=true gives up after this (base builds take ~80 s)
constexpr int64_t kMaxSandboxTimeoutS = 7 * 86400;

bool WantsWait(const Request& req) { return req.Query("wait") == "true" || req.Query("wait") == "1"; }

Result<node::CreateRequest> ParseCreate(const Request& req) {
  ASSIGN_OR_RETURN(nlohmann::json b, ParseObject(req.body));
  RETURN_IF_ERROR(
      CheckKnownFields(b, {"template", "runtime", "cpus", "memory_mb", "disk_mb", "timeout_s", "on_timeout", "env",
                           "metadata", "credentials", "from_snapshot", "snapshot_policy", "volumes"}));
  node::CreateRequest c;
  c.team = req.team;
  c.received_mono_ns = req.received_mono_ns;
  ASSIGN_OR_RETURN(std::string tmpl, GetString(b, "template", "base", 140));
  ASSIGN_OR_RETURN(TemplateRef ref, ParseTemplateRef(tmpl));
  c.template_name = ref.name;
  c.template_digest = ref.digest;  // "name@sha256:...": exactly that digest
  ASSIGN_OR_RETURN(std::string runtime, GetString(b, "runtime", "ns", 16));
  auto kind = store::ParseRuntimeKind(runtime);
  if (!kind.ok()) return InvalidArgument("runtime must be 'ns' or 'vm'");
  c.runtime = *kind;
  ASSIGN_OR_RETURN(c.resources.cpus, GetNumber(b, "cpus", 1, 0.05, 64));
  ASSIGN_OR_RETURN(c.resources.memory_mb, GetInt(b, "memory_mb", 512, 16, 262144));
  ASSIGN_OR_RETURN(c.resources.disk_mb, GetInt(b, "disk_mb", 2048, 16, 16 << 20));
  ASSIGN_OR_RETURN(c.timeout_s, GetInt(b, "timeout_s", 300, 1, kMaxSandboxTimeoutS));
  ASSIGN_OR_RETURN(std::string on_timeout, GetString(b, "on_timeout", "destroy", 16));
  auto action = store::ParseOnTimeout(on_timeout);
  if (!action.ok()) return InvalidArgument("on_timeout must be 'destroy' or 'suspend'");
  c.on_timeout = *action;
  if (b.contains("snapshot_policy") && !b["snapshot_policy"].is_null()) {
    const auto& p = b["snapshot_policy"];
    if (!p.is_object()) return InvalidArgument("field 'snapshot_policy' must be an object");
    RETURN_IF_ERROR(CheckKnownFields(p, {"every_s", "keep", "max_age_s"}));
    ASSIGN_OR_RETURN(int64_t every, GetInt(p, "every_s", 3600, 1, 86400));
    ASSIGN_OR_RETURN(int64_t keep, GetInt(p, "keep", 24, 1, 1000));
    ASSIGN_OR_RETURN(int64_t max_age, GetInt(p, "max_age_s", kMaxSandboxTimeoutS, 60, kMaxSandboxTimeoutS));
    c.snapshot_policy = {.every_s = every, .keep = keep, .max_age_s = max_age};
  }
  ASSIGN_OR_RETURN(c.env, GetStringMap(b, "env", 256, 256, 32768, IsEnvName));
  ASSIGN_OR_RETURN(c.metadata, GetStringMap(b, "metadata", 64, 64, 512, IsMetadataKey));
  ASSIGN_OR_RETURN(c.credentials, GetStringList(b, "credentials", 32, 63));
  ASSIGN_OR_RETURN(c.from_snapshot, GetString(b, "from_snapshot", "", 80));
  if (b.contains("volumes") && !b["volumes"].is_null()) {
    const auto& vols = b["volumes"];
    if (!vols.is_array() || vols.size() > 8)
      return InvalidArgument("field 'volumes' must be an array of at most 8 mounts");
    for (const auto& v : vols) {
      if (!v.is_object()) return InvalidArgument("each of 'volumes' must be an object {name, path, read_only}");
      RETURN_IF_ERROR(CheckKnownFields(v, {"name", "path", "read_only"}));
      node::VolumeRequest r;
      ASSIGN_OR_RETURN(r.name, GetString(v, "name", "", 63));
      ASSIGN_OR_RETURN(r.path, GetString(v, "path", "", 1024));
      ASSIGN_OR_RETURN(r.read_only, GetBool(v, "read_only", false));
      c.volumes.push_back(std::move(r));
    }
    RETURN_IF_ERROR(node::ValidateVolumeRequests(c.volumes));
  }
  if (!c.from_snapshot.empty() && !IsPublicId(c.from_snapshot, "snap")) {
    return NotFound("snapshot " + c.from_snapshot + " not found");
  }
  // X-Space-Egress-Profile: name[,name...], the union of those profiles; none = no egress.
  std::string header = req.Header("x-space-egress-profile");
  if (header.size() > 4096) return InvalidArgument("X-Space-Egress-Profile is longer than 4096 bytes");
  size_t start = 0;
  while (start <= header.size() && !header.empty()) {
    size_t comma = header.find(',', start);
    if (comma == std::string::npos) comma = header.size();
    std::string name = header.substr(start, comma - start);
    while (!name.empty() && name.front() == ' ') name.erase(0, 1);
    while (!name.empty() && name.back() == ' ') name.pop_back();
    if (!IsTemplateName(name)) {
      return InvalidArgument("X-Space-Egress-Profile: profile names must match [a-z0-9][a-z0-9._-]{0,62}");
    }
    if (std::find(c.egress_profiles.begin(), c.egress_profiles.end(), name) == c.egress_profiles.end()) {
      c.egress_profiles.push_back(name);
    }
    if (c.egress_profiles.size() > 16) return InvalidArgument("X-Space-Egress-Profile: at most 16 profiles");
    start = comma + 1;
  }
  return c;
}

}  // namespace

void Api::CreateSandbox(Request& req, Responder& res) {
  auto parsed = ParseCreate(req);
  if (!parsed.ok()) return res.SendError(parsed.status());
  auto created = node_->lifecycle().Create(*parsed);
  if (!created.ok()) return res.SendError(created.status());
  auto& [rec, op] = *created;
  if (!WantsWait(req)) return res.SendJson(202, {{"sandbox", SandboxJson(rec)}, {"operation", OperationJson(op)}});
  auto done = node_->lifecycle().WaitOperation(req.team, op.id, kWaitMs);
  if (!done.ok()) return res.SendError(done.status());
  auto sbx = node_->lifecycle().Get(req.team, rec.id);
  if (!sbx.ok()) return res.SendError(sbx.status());
  if (done->state == store::OperationState::kSucceeded) return res.SendJson(201, {{"sandbox", SandboxJson(*sbx)}});
  if (done->state == store::OperationState::kFailed) {
    return res.SendJson(500, {{"code", "internal"},
                              {"message", "sandbox " + rec.id + " failed to start: " + done->error},
                              {"sandbox", SandboxJson(*sbx)}});
  }
  res.SendJson(202, {{"sandbox", SandboxJson(*sbx)}, {"operation", OperationJson(*done)}});
}

void Api::ListSandboxes(Request& req, Responder& res) {
  store::SandboxFilter f;
  f.team = req.team;
  if (req.HasQuery("state")) {
    // A state no sandbox can be in matches none.
    auto state = store::ParseSandboxState(req.Query("state"));
    if (!state.ok()) return res.SendJson(200, {{"sandboxes", nlohmann::json::array()}, {"next_page_token", nullptr}});
    f.state = *state;
  }
  auto limit = GetInt(nlohmann::json{{"limit", req.HasQuery("limit") ? std::strtoll(req.Query("limit").c_str(), nullptr, 10) : 100}},
                      "limit", 100, 1, 1000);
  if (!limit.ok()) return res.SendError(limit.status());
  std::vector<std::pair<std::string, std::string>> meta;
  for (const auto& [k, v] : req.query) {
    if (k.rfind("metadata.", 0) == 0) meta.emplace_back(k.substr(9), v);
  }
  f.after_id = req.Query("page_token");
  // Metadata filters are applied here, so page through the store until the page is full.
  nlohmann::json out = nlohmann::json::array();
  std::string next;
  f.limit = 200;
  for (;;) {
    auto page = node_->lifecycle().List(f);
    if (!page.ok()) return res.SendError(page.status());
    for (const auto& r : *page) {
      bool match = true;
      for (const auto& [k, v] : meta) {
        auto it = r.metadata.find(k);
        if (it == r.metadata.end() || it->second != v) match = false;
      }
      f.after_id = r.id;
      if (!match) continue;
      out.push_back(SandboxJson(r));
      if (static_cast<int64_t>(out.size()) == *limit) break;
    }
    if (static_cast<int64_t>(out.size()) == *limit) {
      next = f.after_id;
      break;
    }
    if (static_cast<int>(page->size()) < f.limit) break;
  }
  res.SendJson(200, {{"sandboxes", out}, {"next_page_token", next.empty() ? nlohmann::json(nullptr) : nlohmann::json(next)}});
}

void Api::GetSandbox(Request& req, Responder& res, const std::string& id) {
  auto rec = node_->lifecycle().Get(req.team, id);
  if (!rec.ok()) return res.SendError(rec.status());
  nlohmann::json j = SandboxJson(*rec);
  // Read live from the kernel, so only here: a list would cost a cgroup read per sandbox.
  nlohmann::json limits = nlohmann::json::array();
  for (const auto& hit : node_->metrics().LimitsHit(*rec)) {
    limits.push_back({{"kind", hit.kind},
                      {"count", hit.count ? nlohmann::json(*hit.count) : nlohmann::json(nullptr)},
                      {"message", hit.message}});
  }
  j["limits_hit"] = std::move(limits);
  nlohmann::json volumes = nlohmann::json::array();
  if (auto mounts = node_->volumes().OfSandbox(rec->id); mounts.ok()) {
    for (const auto& v : *mounts) volumes.push_back({{"name", v.name}, {"path", v.path}, {"read_only", v.read_only}});
  }
  j["volumes"] = std::move(volumes);
  res.SendJson(200, j);
}

void Api::DeleteSandbox(Request& req, Responder& res, const std::string& id) {
  auto op = node_->lifecycle().Destroy(req.team, id);
  if (!op.ok()) return res.SendError(op.status());
  if (!WantsWait(req)) return res.SendJson(202, OperationJson(*op));
  auto done = node_->lifecycle().WaitOperation(req.team, op->id, kWaitMs);
  if (!done.ok()) return res.SendError(done.status());
  if (done->state == store::OperationState::kSucceeded) return res.Send(204, "application/json", "");
  res.SendJson(done->state == store::OperationState::kFailed ? 500 : 202, OperationJson(*done));
}

void Api::SetTimeout(Request& req, Responder& res, const std::string& id) {
  auto b = ParseObject(req.body);
  if (!b.ok()) return res.SendError(b.status());
  if (Status st = CheckKnownFields(*b, {"timeout_s"}); !st.ok()) return res.SendError(st);
  if (!b->contains("timeout_s")) return res.SendError(InvalidArgument("field 'timeout_s' is required"));
  auto t = GetInt(*b, "timeout_s", 0, 1, kMaxSandboxTimeoutS);
  if (!t.ok()) return res.SendError(t.status());
  auto rec = node_->lifecycle().SetTimeout(req.team, id, *t);
  if (!rec.ok()) return res.SendError(rec.status());
  res.SendJson(200, SandboxJson(*rec));
}

void Api::GetOperation(Request& req, Responder& res, const std::string& id) {
  if (!IsPublicId(id, "op")) return res.SendError(NotFound("operation " + id.substr(0, 80) + " not found"));
  auto op = WantsWait(req) ? node_->lifecycle().WaitOperation(req.team, id, kWaitMs) : node_->lifecycle().GetOperation(req.team, id);
  if (!op.ok()) return res.SendError(op.status());
  res.SendJson(200, OperationJson(*op));
}

void Api::ListAudit(Request& req, Responder& res) {
  store::AuditFilter f;
  f.team = req.team;
  f.sandbox = req.Query("sandbox");
  f.kind = req.Query("kind");
  if (!f.kind.empty() && f.kind != "lifecycle" && f.kind != "exec" && f.kind != "egress" && f.kind != "credential" &&
      f.kind != "ingress" && f.kind != "admin") {
    return res.SendError(InvalidArgument("kind must be lifecycle, exec, egress, credential, ingress or admin"));
  }
  f.limit = 500;
  auto events = node_->audit().List(f);
  if (!events.ok()) return res.SendError(events.status());
  nlohmann::json out = nlohmann::json::array();
  for (const auto& e : *events) {
    out.push_back({{"seq", e.seq},
                   {"time", FormatRfc3339(e.ts_ms)},
                   {"sandbox", e.sandbox},
                   {"kind", e.kind},
                   {"action", e.action},
                   {"detail", e.detail}});
  }
  res.SendJson(200, {{"events", out}});
}

nlohmann::json TemplateJson(const storage::TemplateInfo& t) {
  return {{"name", t.name},
          {"digest", t.digest},
          {"size_bytes", t.size_bytes},
          {"created_at", FormatRfc3339(t.created_at_ms)}};
}

void Api::Templates(Request& req, Responder& res, const std::string& name) {
  if (req.method == "GET" && name.empty()) {
    auto list = node_->templates().List();
    if (!list.ok()) return res.SendError(list.status());
    nlohmann::json out = nlohmann::json::array();
    for (const auto& t : *list) out.push_back(TemplateJson(t));
    return res.SendJson(200, {{"templates", out}});
  }
  if (req.method == "GET") {
    if (!IsTemplateName(name)) return res.SendError(NotFound("template not found"));
    auto t = node_->templates().Get(name);
    if (!t.ok()) return res.SendError(t.status());
    return res.SendJson(200, TemplateJson(*t));
  }
  if (req.method != "POST" || !name.empty()) return res.SendError(NotFound("no route for " + req.method + " " + req.path));
  {
    const bool multipart = req.Header("content-type").rfind("multipart/form-data", 0) == 0;
    auto peek = multipart ? Result<nlohmann::json>(nlohmann::json::object()) : ParseObject(req.body);
    if (IsRecipeRequest(req, peek.ok() ? &*peek : nullptr)) return BuildTemplateFromRecipe(req, res);
  }
  // POST /v1/templates {"name": "base"} builds a built-in; {"name", "source": "/dir|tarball"}
  // imports a tree from the server's filesystem. Progress streams as SSE when asked for.
  if (req.team != "default") return res.SendError(PermissionDenied("only the admin team may build templates"));
  auto b = ParseObject(req.body);
  if (!b.ok()) return res.SendError(b.status());
  if (Status st = CheckKnownFields(*b, {"name", "source"}); !st.ok()) return res.SendError(st);
  auto tname = GetString(*b, "name", "", 63);
  auto source = GetString(*b, "source", "", 4096);
  if (!tname.ok()) return res.SendError(tname.status());
  if (!source.ok()) return res.SendError(source.status());
  if (!IsTemplateName(*tname)) return res.SendError(InvalidArgument("field 'name' must be a valid template name"));
  bool sse = req.Header("accept").find("text/event-stream") != std::string::npos;
  bool client_gone = false;
  auto progress = [&](const std::string& line) {
    LogInfo("template " + *tname, line);
    if (sse && !client_gone) {
      client_gone = !res.Write("event: progress\ndata: " + nlohmann::json{{"line", line}}.dump(-1, ' ', false,
                                   nlohmann::json::error_handler_t::replace) + "\n\n").ok();
    }
  };
  if (sse && !res.StartStream(200, "text/event-stream").ok()) return;
  auto t = source->empty() ? node_->templates().Build(*tname, progress) : node_->templates().Import(*tname, *source, progress);
  if (!sse) {
    if (!t.ok()) return res.SendError(t.status());
    return res.SendJson(201, TemplateJson(*t));
  }
  nlohmann::json ev = t.ok() ? TemplateJson(*t)
                             : nlohmann::json{{"code", std::string(StatusCodeWord(t.status().code()))},
                                              {"message", t.status().message()}};
  (void)res.Write(std::string("event: ") + (t.ok() ? "done" : "error") + "\ndata: " + ev.dump() + "\n\n");
}

void Api::Metrics(Request& req, Responder& res) {
  (void)req;
  std::string out;
  out += "# HELP space_sandboxes_live Sandboxes booted on this node.\n# TYPE space_sandboxes_live gauge\n";
  out += "space_sandboxes_live " + std::to_string(node_->live_count()) + "\n";
  out += node_->WarmPoolMetrics();
  out += node_->ObjectStoreMetrics();
  if (std::string accel = node_->vm_accelerator(); !accel.empty()) {
    out +=
        "# HELP space_vm_accelerator What runs vm sandboxes' CPUs on this node (kvm, tcg, or kvm-unproven until "
        "the first vm launch proves it).\n# TYPE space_vm_accelerator gauge\n";
    out += "space_vm_accelerator{accelerator=\"" + accel + "\"} 1\n";
  }
  res.Send(200, "text/plain; version=0.0.4", out);
}

}  // namespace space::api
