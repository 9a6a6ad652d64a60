// E2B's control API (reference §2) mapped onto the Node: create, connect (resume), kill,
// list with paging, info, timeout, pause, metrics.
#include <algorithm>
#include <set>

#include "common/clock.h"
#include "common/ids.h"
#include "e2b/control_errors.h"
#include "e2b/e2b.h"
#include "http/validate.h"

namespace space::e2b {
namespace {

// The SDK aborts a control call after 60 s, so waits end before that.
constexpr int64_t kWaitMs = 55000;
constexpr int64_t kMaxTimeoutS = 7 * 86400;
constexpr int kMaxListLimit = 1000;
constexpr char kRuntimeKey[] = "space.runtime";

// E2B's template names for "a general-purpose Linux box": both map to SPACE's base.
std::string TemplateFor(const std::string& e2b_name) {
  if (e2b_name.empty() || e2b_name == "code-interpreter-v1" || e2b_name == "code-interpreter") return "base";
  return e2b_name;
}

// E2B knows two states; SPACE's transitional and suspended states all read as paused,
// since connect() resumes every one of them.
std::string E2bState(store::SandboxState state) {
  return state == store::SandboxState::kRunning || state == store::SandboxState::kCreating ? "running" : "paused";
}

Status WaitDone(node::Node* node, const std::string& team, const store::OperationRecord& op) {
  ASSIGN_OR_RETURN(store::OperationRecord done, node->lifecycle().WaitOperation(team, op.id, kWaitMs));
  if (done.state == store::OperationState::kFailed) return Internal(op.kind + " of " + op.target + " failed: " + done.error);
  if (done.state != store::OperationState::kSucceeded) return Unavailable(op.kind + " of " + op.target + " is still running");
  return Status::Ok();
}

// The `metadata` list filter arrives encoded three times (reference §2.2): URL-decoded once
// by the HTTP layer, it is a form string of encodeURIComponent'd keys and values.
Result<std::vector<std::pair<std::string, std::string>>> ParseMetadataFilter(const std::string& form) {
  std::vector<std::pair<std::string, std::string>> out;
  size_t i = 0;
  while (i < form.size()) {
    size_t amp = form.find('&', i);
    if (amp == std::string::npos) amp = form.size();
    std::string pair = form.substr(i, amp - i);
    i = amp + 1;
    if (pair.empty()) continue;
    if (out.size() >= 64) return InvalidArgument("too many metadata filters");
    size_t eq = pair.find('=');
    ASSIGN_OR_RETURN(std::string k, api::UrlDecode(pair.substr(0, eq), true));
    std::string v;
    if (eq != std::string::npos) {
      ASSIGN_OR_RETURN(v, api::UrlDecode(pair.substr(eq + 1), true));
    }
    ASSIGN_OR_RETURN(k, api::UrlDecode(k, false));
    ASSIGN_OR_RETURN(v, api::UrlDecode(v, false));
    out.emplace_back(std::move(k), std::move(v));
  }
  return out;
}

}  // namespace

// Where getHost(port) points: the SDK builds `<port>-<sandboxID>.<domain>`, and the ingress
// reads the lowercased id as the sandbox's label (node/ports.h).
std::string E2b::PreviewDomain() const {
  const node::PortsConfig& pc = node_->ports().config();
  if (pc.listen_port == 0 || pc.listen_port == 80) return pc.domain;
  return pc.domain + ":" + std::to_string(pc.listen_port);
}

nlohmann::json E2b::SandboxJson(const store::Sandbox& r) const {
  std::string token = AccessToken(r.id);
  return {{"sandboxID", r.id},
          {"templateID", r.template_name},
          {"alias", r.template_name},
          {"clientID", r.node},
          {"envdVersion", kEnvdVersion},
          {"envdAccessToken", token},
          {"trafficAccessToken", token},
          {"domain", PreviewDomain()},
          {"metadata", r.metadata},
          {"startedAt", FormatRfc3339(r.created_at_ms)},
          {"endAt", FormatRfc3339(r.expires_at_ms)},
          {"state", E2bState(r.state)},
          {"cpuCount", std::max(1, static_cast<int>(r.resources.cpus + 0.999))},
          {"memoryMB", r.resources.memory_mb},
          {"diskSizeMB", r.resources.disk_mb},
          {"allowInternetAccess", false},
          {"lifecycle",
           {{"onTimeout", r.on_timeout == store::OnTimeout::kSuspend ? "pause" : "kill"}, {"autoResume", false}}}};
}

void E2b::Control(api::Request& req, api::Responder& res) {
  auto p = api::SplitPath(req.path);
  const std::string& m = req.method;
  auto not_found = [&] {
    SendControlError(res, 404, "SPACE does not serve " + m + " " + req.path.substr(0, 200) + " (see docs/e2b.md)");
  };
  bool v2 = !p.empty() && p[0] == "v2";
  if (v2) p.erase(p.begin());
  if (ControlTemplates(req, res, p, v2)) return;
  if (p.empty() || p[0] != "sandboxes") return not_found();
  if (p.size() == 1) {
    if (m == "POST") return CreateSandbox(req, res);
    if (m == "GET") return ListSandboxes(req, res);
    return not_found();
  }
  const std::string& id = p[1];
  if (!IsPublicId(id, "sbx")) return SendControlError(res, 404, "sandbox " + id.substr(0, 80) + " not found");
  if (p.size() == 2) {
    if (m == "GET") return GetSandbox(req, res, id);
    if (m == "DELETE") return KillSandbox(req, res, id);
    return not_found();
  }
  if (p.size() != 3) return not_found();
  const std::string& sub = p[2];
  if (m == "POST" && (sub == "connect" || sub == "resume")) return ConnectSandbox(req, res, id);
  if (m == "POST" && sub == "timeout") return SetTimeout(req, res, id);
  if (m == "POST" && sub == "pause") return PauseSandbox(req, res, id);
  if (m == "GET" && sub == "metrics") return Metrics(req, res, id);
  not_found();
}

void E2b::CreateSandbox(api::Request& req, api::Responder& res) {
  auto body = api::ParseObject(req.body);
  if (!body.ok()) return SendControlError(res, body.status());
  node::CreateRequest c;
  c.team = req.team;
  c.received_mono_ns = req.received_mono_ns;
  // Unknown fields are ignored, not refused: the SDK sends options (mcp, network) that
  // docs/e2b.md lists as unsupported.
  auto tmpl = api::GetString(*body, "templateID", "base", 63);
  if (!tmpl.ok()) return SendControlError(res, tmpl.status());
  c.template_name = TemplateFor(*tmpl);
  if (!api::IsTemplateName(c.template_name)) {
    return SendControlError(res, 400, "template '" + c.template_name + "' is not a valid name");
  }
  auto timeout = api::GetInt(*body, "timeout", 300, 1, kMaxTimeoutS);
  if (!timeout.ok()) return SendControlError(res, timeout.status());
  c.timeout_s = *timeout;
  auto auto_pause = api::GetBool(*body, "autoPause", false);
  if (!auto_pause.ok()) return SendControlError(res, auto_pause.status());
  // E2B's auto-pause keeps the sandbox resumable after its timeout; SPACE's closest is
  // suspend (files kept in the snapshot store, memory not: see docs/e2b.md).
  if (*auto_pause) c.on_timeout = store::OnTimeout::kSuspend;
  auto env = api::GetStringMap(*body, "envVars", 256, 256, 32768, api::IsEnvName);
  if (!env.ok()) return SendControlError(res, env.status());
  c.env = std::move(*env);
  auto metadata = api::GetStringMap(*body, "metadata", 64, 64, 512, api::IsMetadataKey);
  if (!metadata.ok()) return SendControlError(res, metadata.status());
  c.metadata = std::move(*metadata);
  // The SDK has no runtime option, so the runtime rides in a metadata key (docs/e2b.md); it
  // stays in the metadata, where list filters and info show it.
  if (auto it = c.metadata.find(kRuntimeKey); it != c.metadata.end()) {
    auto kind = store::ParseRuntimeKind(it->second);
    if (!kind.ok()) return SendControlError(res, 400, std::string(kRuntimeKey) + " must be 'ns' or 'vm'");
    c.runtime = *kind;
  }

  // E2B serves every port of a sandbox publicly unless the create says
  // network.allowPublicTraffic: false; then none is open until /v1 opens one with a token.
  bool public_ports = true;
  if (auto net = body->find("network"); net != body->end() && net->is_object()) {
    auto allow = api::GetBool(*net, "allowPublicTraffic", true);
    if (!allow.ok()) return SendControlError(res, allow.status());
    public_ports = *allow;
  }

  // volumeMounts [{name, path}]: SPACE volumes (PUT /v1/volumes/{name}), mounted read-write.
  if (auto vols = body->find("volumeMounts"); vols != body->end() && !vols->is_null()) {
    if (!vols->is_array() || vols->size() > 8) {
      return SendControlError(res, 400, "volumeMounts must be an array of at most 8 {name, path}");
    }
    for (const auto& v : *vols) {
      if (!v.is_object()) return SendControlError(res, 400, "each of volumeMounts must be an object {name, path}");
      auto name = api::GetString(v, "name", "", 63);
      auto path = api::GetString(v, "path", "", 1024);
      if (!name.ok()) return SendControlError(res, name.status());
      if (!path.ok()) return SendControlError(res, path.status());
      c.volumes.push_back({*name, *path, false});
    }
    if (Status st = node::ValidateVolumeRequests(c.volumes); !st.ok()) return SendControlError(res, st);
  }

  auto created = node_->lifecycle().Create(c);
  if (!created.ok()) return SendControlError(res, created.status());
  auto& [rec, op] = *created;
  if (Status st = WaitDone(node_, req.team, op); !st.ok()) return SendControlError(res, st);
  if (public_ports) {
    if (auto opened = node_->ports().Open(req.team, rec.id, 0, true, false); !opened.ok()) {
      return SendControlError(res, opened.status());
    }
  }
  auto sbx = node_->lifecycle().Get(req.team, rec.id);
  if (!sbx.ok()) return SendControlError(res, sbx.status());
  res.SendJson(201, SandboxJson(*sbx));
}

void E2b::ConnectSandbox(api::Request& req, api::Responder& res, const std::string& id) {
  auto body = api::ParseObject(req.body);
  if (!body.ok()) return SendControlError(res, body.status());
  auto timeout = api::GetInt(*body, "timeout", 0, 0, kMaxTimeoutS);
  if (!timeout.ok()) return SendControlError(res, timeout.status());
  auto rec = node_->lifecycle().Get(req.team, id);
  if (!rec.ok() || rec->state == store::SandboxState::kDestroyed || rec->state == store::SandboxState::kDestroying || rec->state == store::SandboxState::kFailed) {
    return SendControlError(res, 404, "sandbox " + id + " not found");
  }
  int status = 200;
  if (rec->state != store::SandboxState::kRunning) {
    auto op = node_->lifecycle().Resume(req.team, id);
    if (!op.ok()) return SendControlError(res, op.status());
    if (Status st = WaitDone(node_, req.team, *op); !st.ok()) return SendControlError(res, st);
    status = 201;
  }
  if (*timeout > 0) {
    auto updated = node_->lifecycle().SetTimeout(req.team, id, *timeout);
    if (!updated.ok()) return SendControlError(res, updated.status());
  }
  auto now = node_->lifecycle().Get(req.team, id);
  if (!now.ok()) return SendControlError(res, now.status());
  res.SendJson(status, SandboxJson(*now));
}

void E2b::ListSandboxes(api::Request& req, api::Responder& res) {
  store::SandboxFilter f;
  f.team = req.team;
  std::set<std::string> states;
  std::string state_param = req.Query("state");
  for (size_t i = 0; i < state_param.size();) {
    size_t comma = state_param.find(',', i);
    if (comma == std::string::npos) comma = state_param.size();
    std::string s = state_param.substr(i, comma - i);
    if (s != "running" && s != "paused") return SendControlError(res, 400, "state must be running or paused");
    states.insert(s);
    i = comma + 1;
  }
  if (req.HasQuery("metadata")) {
    auto md = ParseMetadataFilter(req.Query("metadata"));
    if (!md.ok()) return SendControlError(res, md.status());
    f.metadata = std::move(*md);
  }
  int limit = 100;
  if (req.HasQuery("limit")) {
    std::string l = req.Query("limit");
    if (l.empty() || l.size() > 6 || l.find_first_not_of("0123456789") != std::string::npos) {
      return SendControlError(res, 400, "limit must be a positive integer");
    }
    limit = std::clamp(std::stoi(l), 1, kMaxListLimit);
  }
  std::string token = req.Query("nextToken");
  if (!token.empty() && !IsPublicId(token, "sbx")) return SendControlError(res, 400, "nextToken is not valid");
  // The store filters by team only; metadata and state are matched here, so pages of the
  // store are read in id order until `limit` sandboxes matched (and one more proves a next page).
  auto wanted = std::move(f.metadata);
  f.metadata.clear();
  nlohmann::json out = nlohmann::json::array();
  std::string last;
  bool more = false;
  f.after_id = token;
  f.limit = 200;
  for (int round = 0; round < 64 && !more; ++round) {
    auto page = node_->lifecycle().List(f);
    if (!page.ok()) return SendControlError(res, page.status());
    for (const auto& r : *page) {
      f.after_id = r.id;
      if (r.state == store::SandboxState::kDestroyed || r.state == store::SandboxState::kDestroying || r.state == store::SandboxState::kFailed) continue;
      if (!states.empty() && !states.count(E2bState(r.state))) continue;
      bool match = true;
      for (const auto& [k, v] : wanted) {
        auto it = r.metadata.find(k);
        if (it == r.metadata.end() || it->second != v) match = false;
      }
      if (!match) continue;
      if (static_cast<int>(out.size()) == limit) {
        more = true;
        break;
      }
      out.push_back(SandboxJson(r));
      last = r.id;
    }
    if (static_cast<int>(page->size()) < f.limit) break;
  }
  for (auto& s : out) {
    // Listed sandboxes carry no tokens (the SDK reads them only from create/connect).
    s.erase("envdAccessToken");
    s.erase("trafficAccessToken");
  }
  if (more) res.AddHeader("X-Next-Token", last);
  res.SendJson(200, out);
}

void E2b::GetSandbox(api::Request& req, api::Responder& res, const std::string& id) {
  auto rec = node_->lifecycle().Get(req.team, id);
  if (!rec.ok() || rec->state == store::SandboxState::kDestroyed) return SendControlError(res, 404, "sandbox " + id + " not found");
  auto j = SandboxJson(*rec);
  j.erase("envdAccessToken");
  j.erase("trafficAccessToken");
  nlohmann::json mounts = nlohmann::json::array();
  if (auto vols = node_->volumes().OfSandbox(rec->id); vols.ok()) {
    for (const auto& v : *vols) mounts.push_back({{"name", v.name}, {"path", v.path}});
  }
  j["volumeMounts"] = std::move(mounts);
  res.SendJson(200, j);
}

void E2b::KillSandbox(api::Request& req, api::Responder& res, const std::string& id) {
  auto rec = node_->lifecycle().Get(req.team, id);
  if (!rec.ok() || rec->state == store::SandboxState::kDestroyed) return SendControlError(res, 404, "sandbox " + id + " not found");
  auto op = node_->lifecycle().Destroy(req.team, id);
  if (!op.ok()) return SendControlError(res, op.status());
  if (Status st = WaitDone(node_, req.team, *op); !st.ok()) return SendControlError(res, st);
  {
    std::lock_guard<std::mutex> lock(mu_);
    services_.erase(id);
  }
  res.Send(204, "application/json", "");
}

void E2b::SetTimeout(api::Request& req, api::Responder& res, const std::string& id) {
  auto body = api::ParseObject(req.body);
  if (!body.ok()) return SendControlError(res, body.status());
  auto timeout = api::GetInt(*body, "timeout", 300, 1, kMaxTimeoutS);
  if (!timeout.ok()) return SendControlError(res, timeout.status());
  auto rec = node_->lifecycle().SetTimeout(req.team, id, *timeout);
  if (!rec.ok()) return SendControlError(res, rec.status());
  res.Send(204, "application/json", "");
}

void E2b::PauseSandbox(api::Request& req, api::Responder& res, const std::string& id) {
  auto rec = node_->lifecycle().Get(req.team, id);
  if (!rec.ok() || rec->state == store::SandboxState::kDestroyed) return SendControlError(res, 404, "sandbox " + id + " not found");
  if (rec->state != store::SandboxState::kRunning) return SendControlError(res, 409, "sandbox " + id + " is already " + std::string(store::StateName(rec->state)));
  auto op = node_->lifecycle().Pause(req.team, id);
  if (!op.ok()) return SendControlError(res, op.status());
  if (Status st = WaitDone(node_, req.team, *op); !st.ok()) return SendControlError(res, st);
  res.Send(204, "application/json", "");
}

void E2b::Metrics(api::Request& req, api::Responder& res, const std::string& id) {
  auto rec = node_->lifecycle().Get(req.team, id);
  if (!rec.ok() || rec->state == store::SandboxState::kDestroyed) return SendControlError(res, 404, "sandbox " + id + " not found");
  // One sample, taken now: SPACE keeps no metric history, so a time range answers with the
  // current values (docs/e2b.md).
  auto sample = node_->metrics().Sample(req.team, id);
  if (!sample.ok()) return SendControlError(res, sample.status());
  const node::ResourceSample& s = *sample;
  res.SendJson(200, nlohmann::json::array({{
                        {"timestamp", FormatRfc3339(s.at_ms)},
                        {"timestampUnix", s.at_ms / 1000},
                        {"cpuUsedPct", s.cpu_used_pct},
                        {"cpuCount", s.cpu_count},
                        {"memUsed", s.mem_used},
                        {"memTotal", s.mem_total},
                        {"memCache", s.mem_cache},
                        {"diskUsed", s.disk_used},
                        {"diskTotal", s.disk_total},
                    }}));
}

}  // namespace space::e2b
