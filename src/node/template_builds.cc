#include "node/template_builds.h"

#include <optional>

#include "common/log.h"
#include "node/template_start.h"
#include "node/templates.h"
#include "storage/context_tar.h"

namespace space::node {
namespace {

constexpr int64_t kStepTimeoutS = 3600;
constexpr int64_t kBuildSandboxTimeoutS = 6 * 3600;
constexpr int64_t kFollowMs = 1000;

// Runs inside the build sandbox as its root: unpacks the context from stdin into a scratch dir
// there and copies `src` to `dest` as Docker's COPY does (a directory's contents into `dest`;
// a file to `dest`, or into it when `dest` ends in '/'). Owners become root (tar -o). $1, $2:
// src and dest, passed as arguments so no path is ever parsed by the shell.
constexpr char kCopyScript[] = R"sh(set -e
ctx=$(mktemp -d /tmp/.space-context.XXXXXX)
trap 'rm -rf "$ctx"' EXIT
tar -x -o -f - -C "$ctx"
if [ -d "$ctx/$1" ] && [ ! -L "$ctx/$1" ]; then
  mkdir -p "$2"
  cp -a "$ctx/$1/." "$2/"
else
  case "$2" in */) mkdir -p "$2" ;; *) mkdir -p "$(dirname "$2")" ;; esac
  cp -a "$ctx/$1" "$2"
fi
)sh";

nlohmann::json StepEvent(size_t index, size_t of, const std::string& kind, const std::string& state) {
  return {{"step", index}, {"of", of}, {"kind", kind}, {"state", state}};
}

// The build's own sandbox of the current layer, destroyed when the build leaves it.
class BuildSandbox {
 public:
  BuildSandbox(Lifecycle* lifecycle, std::string team) : lifecycle_(lifecycle), team_(std::move(team)) {}
  ~BuildSandbox() { Drop(); }
  bool up() const { return !id_.empty(); }
  const std::string& id() const { return id_; }
  Status Up(const Recipe& r, const std::string& digest) {
    CreateRequest req;
    req.team = team_;
    req.template_name = r.from;
    req.template_digest = digest;
    req.build_layer = true;
    req.egress_profiles = r.egress_profiles;
    req.timeout_s = kBuildSandboxTimeoutS;
    req.resources.cpus = 2;
    req.resources.memory_mb = 1024;
    req.resources.disk_mb = 8192;
    req.metadata = {{"space-template-build", r.name}};
    ASSIGN_OR_RETURN(store::Sandbox sbx, lifecycle_->CreateNow(req));
    id_ = sbx.id;
    return Status::Ok();
  }
  void Drop() {
    if (id_.empty()) return;
    auto op = lifecycle_->Destroy(team_, id_);
    if (!op.ok()) LogWarn("template", "destroying build sandbox " + id_ + ": " + op.status().ToString());
    id_.clear();
  }

 private:
  Lifecycle* const lifecycle_;
  const std::string team_;
  std::string id_;
};

}  // namespace

Status TemplateBuilds::CheckOwner(const std::string& team, const std::string& name) {
  if (IsBuiltinTemplate(name)) return Conflict("template " + name + " is built in");
  auto existing = d_.pool->GetTemplate(name);
  if (!existing.ok()) return existing.status().code() == StatusCode::kNotFound ? Status::Ok() : existing.status();
  if (team == "default") return Status::Ok();  // the admin team
  if (existing->team != team) return PermissionDenied("template " + name + " belongs to another team");
  return Status::Ok();
}

Result<store::OperationRecord> TemplateBuilds::Build(Recipe recipe) {
  RETURN_IF_ERROR(CheckOwner(recipe.team, recipe.name));
  if (!IsBuiltinTemplate(recipe.from)) {
    RETURN_IF_ERROR(recipe.from_digest.empty() ? d_.pool->GetTemplate(recipe.from).status()
                                               : d_.pool->ResolveTemplate(recipe.from, recipe.from_digest).status());
  }
  if (!recipe.context.empty()) RETURN_IF_ERROR(storage::ListTar(recipe.context).status());
  auto log = std::make_shared<BuildLog>(recipe.name);
  const std::string team = recipe.team;  // read before the recipe moves into the work
  const std::string target = "template:" + recipe.name;
  ASSIGN_OR_RETURN(
      store::OperationRecord op, d_.ops->Submit(team, "template_build", target, [this, log, r = std::move(recipe)] {
        Status st = [&] {
          std::shared_lock<std::shared_mutex> building(layers_mu_);
          return Run(r, log.get());
        }();
        if (!st.ok()) {
          log->Finish({"error", {{"code", std::string(StatusCodeWord(st.code()))}, {"message", st.message()}}});
        }
        return st;
      }));
  logs_.Register(op.id, log);
  return op;
}

Result<std::shared_ptr<BuildLog>> TemplateBuilds::Log(const std::string& team, const std::string& name,
                                                      const std::string& op_id) {
  auto op = d_.store->GetOperation(op_id);
  if (!op.ok() || op->team != team || op->target != "template:" + name) {
    return NotFound("no build " + op_id.substr(0, 80) + " of template " + name);
  }
  return logs_.Find(op_id, name);
}

Status TemplateBuilds::Remove(const std::string& team, const std::string& name, bool force) {
  RETURN_IF_ERROR(d_.pool->GetTemplate(name).status());
  RETURN_IF_ERROR(CheckOwner(team, name));
  if (!force) {
    ASSIGN_OR_RETURN(std::vector<store::Sandbox> live, d_.store->ListLiveSandboxes());
    for (const auto& s : live) {
      if (s.template_name == name && !store::IsEnded(s.state)) {
        return Conflict("template " + name + " is in use by sandbox " + s.id + " (remove it with ?force=true anyway)");
      }
    }
  }
  RETURN_IF_ERROR(d_.pool->RemoveTemplate(name));
  return d_.publish == nullptr ? Status::Ok()
                               : d_.publish->WithdrawTemplate(name).Annotate("withdraw template " + name);
}

Result<uint64_t> TemplateBuilds::CollectLayers() {
  std::unique_lock<std::shared_mutex> collecting(layers_mu_);
  ASSIGN_OR_RETURN(uint64_t removed, d_.pool->CollectLayers());
  LogInfo("templates", "collected " + std::to_string(removed) + " layers no template name holds");
  return removed;
}

Status TemplateBuilds::Run(const Recipe& r, BuildLog* log) {
  const size_t total = r.steps.size() + 1;  // the last: start and ready
  auto say = [&](size_t step, const std::string& line) {
    log->Append({"log", {{"step", step}, {"data", line + "\n"}}});
  };
  // The parent layer.
  storage::TemplateInfo parent;
  if (!r.from_digest.empty()) {
    ASSIGN_OR_RETURN(parent, d_.pool->ResolveTemplate(r.from, r.from_digest));
  } else if (IsBuiltinTemplate(r.from)) {
    ASSIGN_OR_RETURN(parent, d_.pool->EnsureTemplate(r.from, [&](const std::string& l) { say(0, l); }));
  } else {
    ASSIGN_OR_RETURN(parent, d_.pool->GetTemplate(r.from));
  }
  say(0, "FROM " + r.from + "@" + parent.digest);
  std::vector<storage::TarMember> context;
  if (!r.context.empty()) {
    ASSIGN_OR_RETURN(context, storage::ListTar(r.context));
  }

  std::string digest = parent.digest;
  ASSIGN_OR_RETURN(TemplateConfig config, ReadTemplateConfig(d_.pool->TemplatePath(digest)));
  BuildSandbox sandbox(d_.lifecycle, r.team);
  size_t cached = 0, ran = 0;

  // Turns the sandbox's root into the next layer, cached under `key`.
  auto commit = [&](size_t index, const std::string& key) -> Status {
    RETURN_IF_ERROR(d_.io->WriteFile(r.team, sandbox.id(), std::string("/") + kTemplateConfigPath, 0644,
                                     EncodeTemplateConfig(config)));
    ASSIGN_OR_RETURN(storage::TemplateInfo layer, d_.pool->CommitRoot(sandbox.id()));
    RETURN_IF_ERROR(d_.pool->PutCachedLayer(key, layer.digest));
    digest = layer.digest;
    log->Append({"step", StepEvent(index, total, "", "done")});
    log->Append({"step", {{"step", index}, {"of", total}, {"state", "layer"}, {"digest", digest}}});
    return Status::Ok();
  };
  // Takes a cached layer for `key`, if the build may.
  auto take_cached = [&](size_t index, const std::string& kind, const std::string& key) -> bool {
    if (r.no_cache) return false;
    auto hit = d_.pool->CachedLayer(key);
    if (!hit.ok()) return false;
    // The sandbox (if any) holds the previous layer, not this one.
    sandbox.Drop();
    digest = *hit;
    ++cached;
    say(index,
        "step " + std::to_string(index) + "/" + std::to_string(total) + " " + kind + ": cached (" + digest + ")");
    nlohmann::json ev = StepEvent(index, total, kind, "cached");
    ev["digest"] = digest;
    log->Append({"step", ev});
    return true;
  };
  auto ensure_sandbox = [&]() -> Status {
    if (sandbox.up()) return Status::Ok();
    return sandbox.Up(r, digest);
  };
  // Runs `spec` in the sandbox, its output to the log; fails on a non-zero exit.
  auto run = [&](size_t index, const std::string& kind, ProcessSpec spec) -> Status {
    ASSIGN_OR_RETURN(auto proc, d_.io->Start(r.team, sandbox.id(), std::move(spec)));
    size_t next = 0;
    std::vector<ProcessEvent> events;
    for (bool more = true; more;) {
      events.clear();
      more = proc->Follow(&next, &events, kFollowMs);
      for (const auto& e : events) {
        if (e.kind == ProcessEvent::Kind::kStdout || e.kind == ProcessEvent::Kind::kStderr) {
          log->Append({"log", {{"step", index}, {"data", e.data}}});
        }
      }
    }
    auto exit = proc->exit_info();
    if (!exit)
      return Unavailable("step " + std::to_string(index) + " (" + kind +
                         ") lost its sandbox: " + proc->failure().message());
    if (exit->exit_code && *exit->exit_code == 0) return Status::Ok();
    std::string how = exit->timed_out   ? "timed out"
                      : exit->exit_code ? "exited with code " + std::to_string(*exit->exit_code)
                                        : "was killed by " + SignalName(exit->signal.value_or(0));
    log->Append({"step",
                 {{"step", index},
                  {"of", total},
                  {"kind", kind},
                  {"state", "failed"},
                  {"exit_code", exit->exit_code ? nlohmann::json(*exit->exit_code) : nlohmann::json(nullptr)}}});
    return InvalidArgument("step " + std::to_string(index) + " (" + kind + ") " + how);
  };

  for (size_t i = 0; i < r.steps.size(); ++i) {
    const RecipeStep& step = r.steps[i];
    const size_t index = i + 1;
    const std::string kind = StepKindName(step.kind);
    std::string copied;
    if (step.kind == StepKind::kCopy) {
      ASSIGN_OR_RETURN(copied, storage::ContextDigest(context, step.src));
    }
    const std::string key = StepCacheKey(digest, step, copied);
    ApplyStepToConfig(step, &config);
    if (take_cached(index, kind, key)) continue;
    ++ran;
    say(index,
        "step " + std::to_string(index) + "/" + std::to_string(total) + " " + kind + ": " + StepJson(step).dump());
    log->Append({"step", StepEvent(index, total, kind, "running")});
    RETURN_IF_ERROR(ensure_sandbox());
    ProcessSpec spec;
    spec.env.assign(config.env.begin(), config.env.end());
    spec.timeout_s = kStepTimeoutS;
    switch (step.kind) {
      case StepKind::kRun:
        spec.cmd = {"/bin/sh", "-c", step.command};
        spec.user = config.user.empty() ? "root" : config.user;
        spec.cwd = config.workdir;
        RETURN_IF_ERROR(run(index, kind, std::move(spec)));
        break;
      case StepKind::kWorkdir:
        spec.cmd = {"mkdir", "-p", step.value};
        RETURN_IF_ERROR(run(index, kind, std::move(spec)));
        break;
      case StepKind::kUser:
        spec.cmd = {"id", step.value};  // the user must exist in the tree
        RETURN_IF_ERROR(run(index, kind, std::move(spec)));
        break;
      case StepKind::kCopy:
        spec.cmd = {"/bin/sh", "-c", kCopyScript, "sh", step.src, step.dest};
        spec.stdin_data = r.context;
        RETURN_IF_ERROR(run(index, kind, std::move(spec)));
        break;
      case StepKind::kEnv:
        break;
    }
    RETURN_IF_ERROR(commit(index, key));
  }

  // The last layer records start and ready, unless they are what the tree has already.
  const size_t last = total;
  TemplateConfig final_config = config;
  if (!r.start.empty()) final_config.start = r.start;
  if (!r.ready.empty()) final_config.ready = r.ready;
  // The tree's config is `config` now (each layer wrote it; with no steps, the parent's).
  if (final_config != config) {
    const std::string key = FinalCacheKey(digest, final_config.start, final_config.ready);
    config = final_config;
    if (!take_cached(last, "start", key)) {
      ++ran;
      say(last, "step " + std::to_string(last) + "/" + std::to_string(total) +
                    " start/ready: " + nlohmann::json{{"start", config.start}, {"ready", config.ready}}.dump());
      log->Append({"step", StepEvent(last, total, "start", "running")});
      RETURN_IF_ERROR(ensure_sandbox());
      RETURN_IF_ERROR(commit(last, key));
    }
  }
  sandbox.Drop();
  ASSIGN_OR_RETURN(storage::TemplateInfo named, d_.pool->NameTemplate(r.name, digest, r.team));
  if (d_.publish != nullptr) {
    say(last, "publishing " + r.name + " to the fleet's store");
    RETURN_IF_ERROR(d_.publish->PublishTemplate(named).Annotate("publish template " + r.name));
  }
  say(last, "template " + r.name + " = " + named.digest + " (" + std::to_string(ran) + " steps ran, " +
                std::to_string(cached) + " cached)");
  log->Finish({"done",
               {{"name", named.name},
                {"digest", named.digest},
                {"size_bytes", named.size_bytes},
                {"steps_run", ran},
                {"steps_cached", cached}}});
  return Status::Ok();
}

}  // namespace space::node
