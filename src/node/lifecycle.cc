// Lifecycle: create, boot, destroy, timeouts, lost guests and reconciliation.
#include "node/lifecycle.h"

#include <sys/resource.h>
#include <unistd.h>

#include <set>

#include "common/clock.h"
#include "common/host_slots.h"
#include "common/log.h"
#include "common/nice.h"
#include "common/random.h"
#include "node/owned_sandbox.h"
#include "node/runtimes.h"
#include "node/template_start.h"
#include "node/templates.h"
#include "runtime/vm/vm_runtime.h"
#include "store/quotas.h"

namespace space::node {
namespace {

using store::SandboxState;

constexpr int kHelloTimeoutMs = 10000;
// A microVM boots a kernel first; under TCG emulation that takes seconds.
constexpr int kVmHelloTimeoutMs = 90000;

std::string Hostname(const std::string& id) {
  std::string h = id;
  for (char& c : h) {
    if (c == '_') c = '-';
  }
  return h.substr(0, 63);
}

}  // namespace

Lifecycle::Lifecycle(Deps deps, const std::map<std::string, int>& warm_pool)
    : d_(std::move(deps)),
      warm_(warm_pool, SandboxFactory{.make = [this](const std::string& t) { return MakeWarm(t); },
                                      .destroy = [this](const std::shared_ptr<WarmSandbox>& w) { DestroyWarm(w); }}) {}

Result<nlohmann::json> Lifecycle::ResolveEgress(const std::string& team, const std::vector<std::string>& names) {
  if (names.empty()) return nlohmann::json::array();
  if (!d_.egress) return InvalidArgument("egress is disabled on this node; create the sandbox without egress profiles");
  return d_.egress->ResolveProfiles(team, names);
}

Result<SandboxAndOp> Lifecycle::Create(const CreateRequest& in) {
  CreateRequest req = in;
  std::optional<SandboxAndOp> served;
  ASSIGN_OR_RETURN(store::Sandbox rec, PrepareCreate(&req, /*allow_warm=*/true, &served));
  if (served) return std::move(*served);
  warm_.CreateStarted();  // the refill thread yields to it
  auto op = d_.ops->Submit(req.team, "create", rec.id, [this, rec, req] { return RunCreate(rec, req); });
  if (!op.ok()) {
    warm_.CreateFinished();
    return op.status();
  }
  return std::make_pair(rec, *op);
}

Result<store::Sandbox> Lifecycle::CreateNow(const CreateRequest& in) {
  CreateRequest req = in;
  std::optional<SandboxAndOp> served;
  ASSIGN_OR_RETURN(store::Sandbox rec, PrepareCreate(&req, /*allow_warm=*/false, &served));
  warm_.CreateStarted();
  RETURN_IF_ERROR(RunCreate(rec, req));
  return d_.store->GetSandbox(rec.id);
}

Result<store::Sandbox> Lifecycle::PrepareCreate(CreateRequest* in, bool allow_warm,
                                                std::optional<SandboxAndOp>* served) {
  CreateRequest& req = *in;
  std::string template_digest;
  std::string current_digest;  // of an imported template, to spot pooled sandboxes made before a re-import
  TemplateConfig config;       // a built template's env joins the sandbox's
  if (!req.template_digest.empty() && req.from_snapshot.empty()) {
    // Exactly that digest, or not_found: never a build of the name made since.
    if (req.build_layer) {
      if (!d_.pool->HasTemplateTree(req.template_digest)) return NotFound("no build layer " + req.template_digest);
    } else {
      Status found = d_.pool->ResolveTemplate(req.template_name, req.template_digest).status();
      if (found.code() == StatusCode::kNotFound && d_.pull_templates && PullTemplate(&req).ok()) {
        found = d_.pool->ResolveTemplate(req.template_name, req.template_digest).status();
      }
      RETURN_IF_ERROR(found);
    }
    template_digest = req.template_digest;
    ASSIGN_OR_RETURN(config, ReadTemplateConfig(d_.pool->TemplatePath(template_digest)));
    allow_warm = false;
  } else if (!req.from_snapshot.empty()) {
    // A restore keeps the template lineage and the machine of the sandbox the snapshot was
    // taken of.
    ASSIGN_OR_RETURN(store::SnapshotRecord snap, d_.snapshots->Get(req.team, req.from_snapshot));
    ASSIGN_OR_RETURN(store::Sandbox origin, d_.store->GetSandbox(snap.sandbox));
    req.template_name = origin.template_name;
    template_digest = origin.template_digest;
    req.runtime = origin.runtime;
    if (req.runtime == store::RuntimeKind::kVm) {
      // A full checkpoint restores into the machine it was taken of: same RAM, same vCPUs.
      req.resources.memory_mb = origin.resources.memory_mb;
      req.resources.cpus = origin.resources.cpus;
    }
  } else if (!IsBuiltinTemplate(req.template_name)) {
    // Imported templates must exist now; built-ins are built on first use.
    auto found = d_.pool->GetTemplate(req.template_name);
    // A fleet node creates from the template as the store records it: pulled on first use,
    // and again when another node rebuilt it. One it holds but no node published (imported
    // before it joined the fleet) is its own.
    if (d_.pull_templates) {
      auto pulled = PullTemplate(&req);
      if (pulled.ok() || !found.ok()) {
        found = std::move(pulled);
      } else if (pulled.status().code() != StatusCode::kNotFound) {
        LogWarn("lifecycle", "template " + req.template_name + " from the local copy: " + pulled.status().ToString());
      }
    }
    ASSIGN_OR_RETURN(storage::TemplateInfo tmpl, std::move(found));
    current_digest = tmpl.digest;
    ASSIGN_OR_RETURN(config, ReadTemplateConfig(tmpl.path));
    // Pinned now, so the sandbox gets the tree whose env it was given.
    template_digest = tmpl.digest;
    req.template_digest = tmpl.digest;
    if (!config.start.empty() || !config.ready.empty()) allow_warm = false;  // a pooled one never ran them
  }
  // Checked before a pooled sandbox is taken, so a refused request costs the pool nothing.
  nlohmann::json egress;
  if (req.inherited_egress) {
    egress = *req.inherited_egress;
  } else {
    ASSIGN_OR_RETURN(egress, ResolveEgress(req.team, req.egress_profiles));
  }
  if (req.runtime == store::RuntimeKind::kVm && !d_.runtimes->vm()) {
    return Unavailable("runtime 'vm' is not available on this node (qemu-system-x86 missing?)");
  }
  if (!req.volumes.empty()) {
    if (req.runtime == store::RuntimeKind::kVm) {
      return InvalidArgument("volumes are mounted into ns sandboxes only: the vm runtime has no volume disk yet");
    }
    if (!req.from_snapshot.empty()) return InvalidArgument("volumes are mounted at create, not into a fork or restore");
    allow_warm = false;  // a pooled sandbox booted without them
  }
  // The team's quotas (store/quotas.h), before a pooled sandbox is taken.
  RETURN_IF_ERROR(store::AdmitSandbox(d_.store, req.team, req.resources));
  // Warm pools hold sandboxes of a template, never a restore; a pooled VM has no NIC backend,
  // fixed vCPUs and a disk of the pool's size (lifecycle_warm.cc).
  const bool vm_create = req.runtime == store::RuntimeKind::kVm;
  const std::string pool_key = WarmPoolKey(req.template_name, vm_create);
  std::shared_ptr<WarmSandbox> warm;
  if (allow_warm && req.from_snapshot.empty()) {
    if (vm_create && (!egress.empty() || req.resources.cpus != kWarmCpus || req.resources.disk_mb != kWarmDiskMb)) {
      warm_.CountMiss(pool_key);
    } else {
      warm = warm_.Take(pool_key, req.resources.memory_mb);
    }
  }
  if (warm && !current_digest.empty() && warm->template_digest != current_digest) {
    DestroyWarm(warm);
    warm.reset();
  }
  // A pooled sandbox brings its id (its hostname, root and cgroup were made for it): the id was
  // random and unseen until now, so the sandbox is as new to the user as a cold one. Refused
  // before it was handed out, the pooled sandbox goes (never back to the pool, since rows may
  // already name its id).
  struct DiscardUnlessSubmitted {
    Lifecycle* lifecycle;
    std::shared_ptr<WarmSandbox>* warm;
    ~DiscardUnlessSubmitted() {
      if (*warm) lifecycle->DestroyWarm(*warm);
    }
  } discard_warm{this, &warm};
  store::Sandbox rec;
  rec.id = warm ? warm->live->id : NewId("sbx");
  rec.team = req.team;
  rec.state = SandboxState::kCreating;
  rec.template_name = req.template_name;
  rec.template_digest = template_digest;
  rec.head_snapshot = req.from_snapshot;
  rec.runtime = req.runtime;
  rec.node = d_.node_name;
  rec.created_at_ms = WallNowMs();
  rec.timeout_s = req.timeout_s;
  rec.expires_at_ms = rec.created_at_ms + req.timeout_s * 1000;
  rec.on_timeout = req.on_timeout;
  rec.metadata = req.metadata;
  rec.egress = std::move(egress);
  std::map<std::string, std::string> env = config.env;
  for (const auto& [k, v] : req.env) env[k] = v;  // the create's own env wins over the template's
  RETURN_IF_ERROR(d_.credentials->Attach(req.team, rec.id, req.credentials, req.metadata, &env));
  rec.env = std::move(env);
  rec.resources = req.resources;
  rec.policy = req.snapshot_policy;
  if (warm) {
    ASSIGN_OR_RETURN(*served, CreateFromWarm(&rec, req, &warm));
    if (*served) return rec;
  }
  // Recorded before the sandbox is: a second writer is refused here, in the request.
  if (!req.volumes.empty()) {
    if (!d_.volumes) return Unavailable("volumes are not available on this node");
    RETURN_IF_ERROR(d_.volumes->Attach(req.team, rec.id, req.volumes));
  }
  if (Status st = d_.store->PutSandbox(rec); !st.ok()) {
    if (d_.volumes && !req.volumes.empty()) (void)d_.volumes->Release(rec.id, false, true);
    return st;
  }
  d_.audit->Record(req.team, rec.id, "lifecycle", "create", {{"template", req.template_name}});
  return rec;
}

Result<storage::TemplateInfo> Lifecycle::PullTemplate(CreateRequest* req) {
  const int64_t start = MonoNowNs();
  bool restored = false;
  auto pulled = d_.snapshots->PullTemplate(req->template_name, &restored);
  if (restored) req->pull_template_ms = static_cast<double>(MonoNowNs() - start) / 1e6;
  return pulled;
}

Status Lifecycle::RunCreate(store::Sandbox rec, CreateRequest req) {
  struct CreateDone {
    WarmPools* pools;
    ~CreateDone() { pools->CreateFinished(); }
  } done{&warm_};
  nlohmann::json steps = nlohmann::json::object();
  TemplateConfig config;  // a built template's, read from its tree
  auto step_start = MonoNowNs();
  auto mark = [&](const char* name) {
    int64_t now = MonoNowNs();
    steps[name] = static_cast<double>(now - step_start) / 1e6;
    step_start = now;
  };
  if (req.pull_template_ms > 0) steps["pull_template"] = req.pull_template_ms;
  Status st = [&]() -> Status {
    const uint64_t disk_limit = RootQuotaBytes(rec.runtime, req.resources);
    if (!req.from_snapshot.empty()) {
      RETURN_IF_ERROR(d_.snapshots->EnsureLocal(req.from_snapshot));
      RETURN_IF_ERROR(d_.pool->CreateRootFromSnapshot(rec.id, req.from_snapshot, disk_limit).status());
      mark("clone_snapshot");
    } else if (!req.template_digest.empty()) {
      rec.template_digest = req.template_digest;
      RETURN_IF_ERROR(d_.pool->CreateRoot(rec.id, req.template_digest, disk_limit).status());
      mark("clone_root");
      ASSIGN_OR_RETURN(config, ReadTemplateConfig(d_.pool->TemplatePath(req.template_digest)));
    } else {
      ASSIGN_OR_RETURN(storage::TemplateInfo tmpl,
                       d_.pool->EnsureTemplate(req.template_name, [&](const std::string& l) {
                         LogInfo("template " + req.template_name, l);
                       }));
      rec.template_digest = tmpl.digest;
      mark("template");
      RETURN_IF_ERROR(d_.pool->CreateRoot(rec.id, tmpl.digest, disk_limit).status());
      mark("clone_root");
    }
    RETURN_IF_ERROR(Boot(&rec, &steps));
    // A build's own sandboxes run steps, never the template's commands.
    if (req.build_layer || (config.start.empty() && config.ready.empty())) return Status::Ok();
    if (!template_starter_) return Internal("no template starter on this node");
    // Recorded running first: the start and ready commands go through SandboxIo, which
    // serves running sandboxes only.
    rec.state = SandboxState::kRunning;
    RETURN_IF_ERROR(d_.store->PutSandbox(rec));
    return template_starter_(rec, config, &steps);
  }();
  if (!st.ok()) {
    Teardown(rec.id);
    if (Status d = d_.pool->DestroyRoot(rec.id); !d.ok()) LogWarn("node", d.ToString());
    if (d_.volumes) {
      if (Status d = d_.volumes->Release(rec.id, false, true); !d.ok()) LogWarn("node", d.ToString());
    }
    rec.state = SandboxState::kFailed;
    rec.error = st.message();
    rec.timings = nlohmann::json{{"steps", steps}};
    if (Status p = d_.store->PutSandbox(rec); !p.ok()) LogError("node", p.ToString());
    d_.audit->Record(rec.team, rec.id, "lifecycle", "create_failed", {{"error", st.message()}});
    return st;
  }
  const double create_ms =
      static_cast<double>(MonoNowNs() - (req.received_mono_ns ? req.received_mono_ns : step_start)) / 1e6;
  rec.timings = nlohmann::json{{"create_ms", create_ms}, {"steps", steps}};
  rec.state = SandboxState::kRunning;
  // A destroy may have been requested while we were booting: it wins.
  if (d_.live->IsEnding(rec.id)) return Status::Ok();
  return d_.store->PutSandbox(rec);
}

Status Lifecycle::Boot(store::Sandbox* rec, nlohmann::json* steps, std::shared_ptr<LiveSandbox>* pooled) {
  auto t = MonoNowNs();
  ASSIGN_OR_RETURN(int64_t slot, d_.uid_slots->Acquire(rec->uid_slot));
  rec->uid_slot = slot;
  runtime::SandboxSpec spec;
  spec.id = rec->id;
  spec.rootfs = d_.pool->RootPath(rec->id);
  spec.hostname = Hostname(rec->id);
  spec.uid_base = HostSlots::UidBase(slot);
  spec.guest_binary = d_.guest_binary;
  spec.limits.cpus = rec->resources.cpus;
  spec.limits.memory_bytes = static_cast<uint64_t>(rec->resources.memory_mb) << 20;
  spec.limits.pids_max = runtime::PidsMaxFor(spec.limits.memory_bytes);
  spec.disk_bytes = static_cast<uint64_t>(rec->resources.disk_mb) << 20;
  for (const auto& [k, v] : rec->env) spec.guest_env.push_back(k + "=" + v);
  spec.guest_env.push_back("SPACE_SANDBOX_ID=" + rec->id);
  runtime::Runtime* rt = d_.runtimes->For(rec->runtime);
  const bool vm = rt == d_.runtimes->vm();
  if (d_.volumes) {
    // Each volume's newest copy in this pool (pulled from the store if need be) first.
    t = MonoNowNs();
    auto volumes = d_.volumes->Prepare(rec->id);
    if (!volumes.ok()) {
      d_.uid_slots->Release(slot);
      return volumes.status();
    }
    if (vm && !volumes->empty()) {
      d_.uid_slots->Release(slot);
      return InvalidArgument("sandbox " + rec->id + " mounts volumes, which the vm runtime does not support");
    }
    spec.volumes = std::move(*volumes);
    if (!spec.volumes.empty()) (*steps)["volumes"] = static_cast<double>(MonoNowNs() - t) / 1e6;
  }
  const std::string vm_state = spec.rootfs + "/" + runtime::kVmStateDir + "/" + runtime::kVmMemoryName;
  if (vm) {
    spec.template_digest = rec->template_digest;
    // A root restored from a full snapshot carries the memory it was taken with. Looked up
    // beneath the root without following symlinks: the root's contents are not trusted.
    ASSIGN_OR_RETURN(bool has_state, runtime::HasVmStateFile(spec.rootfs, runtime::kVmMemoryName));
    if (has_state) spec.restore_state = vm_state;
  }
  if (rec->has_egress()) {
    // The gateway's CA is added to the system bundle at boot; point the runtimes that keep
    // their own trust stores at it too.
    for (const auto& [k, v] : kEgressTrustEnv) spec.guest_env.push_back(std::string(k) + "=" + v);
  }
  (*steps)["uid_slot"] = static_cast<double>(MonoNowNs() - t) / 1e6;
  // A vm sandbox's link exists before its VMM: the VMM gets the tap's descriptor at start.
  std::optional<Egress::VmLink> vm_link;
  if (vm && rec->has_egress()) {
    if (!d_.egress) {
      d_.uid_slots->Release(slot);
      return Unavailable("sandbox " + rec->id + " has egress profiles but egress is disabled on this node");
    }
    t = MonoNowNs();
    auto link = d_.egress->PrepareVmLink(slot);
    if (!link.ok()) {
      d_.uid_slots->Release(slot);
      return link.status();
    }
    vm_link = std::move(*link);
    spec.net_tap_fd = vm_link->tap.get();
    spec.guest_mac = vm_link->mac;
    (*steps)["egress.net_tap"] = static_cast<double>(MonoNowNs() - t) / 1e6;
  }
  // A pooled VM is launched by the low-priority refill thread: its VMM and every thread QEMU
  // makes later inherit the launching thread's nice value, so the launch runs at normal
  // priority (a cold VM's); ns sandboxes get theirs back below.
  const int launch_nice = ::getpriority(PRIO_PROCESS, 0);
  const bool renice_launch = pooled != nullptr && vm && launch_nice != 0;
  if (renice_launch) {
    if (Status st = SetThreadNice(d_.privileged, 0); !st.ok()) LogWarn("warm", st.ToString());
  }
  auto launched = rt->Launch(spec);
  if (renice_launch) (void)SetThreadNice(nullptr, launch_nice);  // a raise: needs nothing
  // The VMM holds its own copy now; ours goes, so the link lives exactly as long as the VMM.
  if (vm_link) vm_link->tap.reset();
  if (!launched.ok()) {
    d_.uid_slots->Release(slot);
    return launched.status();
  }
  const std::string step_prefix = vm ? "vm." : "ns.";
  for (const auto& [name, us] : launched->steps_us) (*steps)[step_prefix + name] = static_cast<double>(us) / 1e3;
  // Loaded into the VMM: the memory state lives on only in the snapshot it came from.
  if (!spec.restore_state.empty()) ::unlink(spec.restore_state.c_str());
  t = MonoNowNs();
  auto live = std::make_shared<LiveSandbox>();
  live->id = rec->id;
  live->team = rec->team;
  live->uid_slot = slot;
  live->booted_mono_ns = MonoNowNs();
  live->expires_at_ms = rec->expires_at_ms;
  live->last_rolling_ms = WallNowMs();
  live->rolling_every_ms = rec->policy.every_s * 1000;
  live->guest = std::make_unique<GuestClient>(std::move(launched->channel), rec->id);
  live->init_pid = launched->pid;
  live->runtime = rt;
  if (vm) {
    // spaced's environment in a VM is what the kernel gave init; the sandbox's own env is
    // added to every process instead (as for a warm-pool sandbox).
    for (const auto& kv : spec.guest_env) {
      auto eq = kv.find('=');
      std::string k = kv.substr(0, eq);
      if (k != "HOME" && k != "USER" && k != "LOGNAME" && k != "SHELL") live->base_env[k] = kv.substr(eq + 1);
    }
  }
  if (pooled != nullptr) {
    // The low-priority refill thread makes pooled sandboxes; what outlives the refill (spaced
    // and this channel's reader thread, which inherit the caller's nice value) must run at
    // normal priority, like a cold sandbox's. Lowering a nice value takes CAP_SYS_NICE: the
    // broker's (common/nice.h); a failure costs priority, not the sandbox.
    if (Status st = SetChildNice(d_.privileged, launched->pidfd.get(), launched->pid, 0); !st.ok())
      LogWarn("warm", st.ToString());
    const int nice_before = ::getpriority(PRIO_PROCESS, 0);
    if (nice_before != 0) {
      if (Status st = SetThreadNice(d_.privileged, 0); !st.ok()) LogWarn("warm", st.ToString());
    }
    // A pooled VM restored from its template's checkpoint said hello long ago (to the template
    // VM's connection): it is resynchronized, as any restore is.
    Status started = launched->restored ? live->guest->Resume(kVmHelloTimeoutMs, launched->disk_bytes)
                                        : live->guest->Start(vm ? kVmHelloTimeoutMs : kHelloTimeoutMs);
    if (nice_before != 0) (void)SetThreadNice(nullptr, nice_before);  // a raise: needs nothing
    if (Status st = started; !st.ok()) {
      live->guest->Shutdown();
      if (Status d = rt->Destroy(rec->id); !d.ok()) LogWarn("warm", d.ToString());
      d_.uid_slots->Release(slot);
      return st;
    }
    (*steps)["guest_hello"] = static_cast<double>(MonoNowNs() - t) / 1e6;
    *pooled = std::move(live);
    return Status::Ok();
  }
  d_.live->Insert(live);
  if (launched->restored) {
    RETURN_IF_ERROR(live->guest->Resume(kVmHelloTimeoutMs, launched->disk_bytes));
    (*steps)["guest_resync"] = static_cast<double>(MonoNowNs() - t) / 1e6;
  } else {
    RETURN_IF_ERROR(live->guest->Start(vm ? kVmHelloTimeoutMs : kHelloTimeoutMs));
    (*steps)["guest_hello"] = static_cast<double>(MonoNowNs() - t) / 1e6;
  }
  if (vm_link) {
    t = MonoNowNs();
    RETURN_IF_ERROR(d_.egress->AttachVm(*rec, live.get(), *vm_link));
    (*steps)["egress"] = static_cast<double>(MonoNowNs() - t) / 1e6;
  } else if (rec->has_egress() && !vm) {
    t = MonoNowNs();
    if (!d_.egress)
      return Unavailable("sandbox " + rec->id + " has egress profiles but egress is disabled on this node");
    RETURN_IF_ERROR(d_.egress->Attach(*rec, live.get(), launched->pid, steps));
    (*steps)["egress"] = static_cast<double>(MonoNowNs() - t) / 1e6;
  }
  return Status::Ok();
}

void Lifecycle::Teardown(const std::string& id) {
  std::shared_ptr<LiveSandbox> live = d_.live->Remove(id);
  if (live) {
    live->guest->Shutdown();
    if (d_.egress) d_.egress->Detach(live.get());
  }
  runtime::Runtime* rt = live && live->runtime ? live->runtime : RuntimeOf(id);
  if (Status st = rt->Destroy(id); !st.ok()) LogWarn("node", "destroy " + id + ": " + st.ToString());
  if (live) d_.uid_slots->Release(live->uid_slot);
  // Its read-only volume views (a boot makes them again).
  if (d_.volumes) {
    if (Status st = d_.volumes->Release(id, false, false); !st.ok()) LogWarn("node", st.ToString());
  }
}

void Lifecycle::ShutdownLive() {
  for (auto& [id, l] : d_.live->TakeAll()) {
    l->guest->Shutdown();
    if (d_.egress) d_.egress->Detach(l.get());
    if (Status st = l->runtime->Destroy(id); !st.ok()) LogWarn("node", st.ToString());
  }
}

int Lifecycle::EndDisowned() {
  int ended = 0;
  for (const auto& id : d_.live->Ids()) {
    auto rec = d_.store->GetSandbox(id);
    if (!rec.ok()) continue;  // the store is unreachable: decide nothing now
    if (rec->node == d_.node_name && !store::IsEnded(rec->state)) continue;
    LogWarn("node", "ending " + id + ": its record says " + std::string(store::StateName(rec->state)) + " on " +
                        rec->node + " (this node was declared lost while it ran)");
    Teardown(id);
    if (Status st = d_.pool->DestroyRoot(id); !st.ok()) LogWarn("node", st.ToString());
    ++ended;
  }
  return ended;
}

runtime::Runtime* Lifecycle::RuntimeOf(const std::string& id) {
  if (auto live = d_.live->Find(id); live && live->runtime != nullptr) return live->runtime;
  auto rec = d_.store->GetSandbox(id);
  return d_.runtimes->For(rec.ok() ? rec->runtime : store::RuntimeKind::kNs);
}

Result<store::Sandbox> Lifecycle::Get(const std::string& team, const std::string& id) {
  return GetOwned(d_.store, team, id);
}

Result<std::vector<store::Sandbox>> Lifecycle::List(const store::SandboxFilter& filter) {
  return d_.store->ListSandboxes(filter);
}

Result<store::OperationRecord> Lifecycle::Destroy(const std::string& team, const std::string& id) {
  ASSIGN_OR_RETURN(store::Sandbox rec, Get(team, id));
  if (rec.state == SandboxState::kDestroyed) return NotFound("sandbox " + id + " not found");
  d_.live->MarkEnding(id);
  rec.state = SandboxState::kDestroying;
  RETURN_IF_ERROR(d_.store->PutSandbox(rec));
  d_.audit->Record(team, id, "lifecycle", "destroy");
  return d_.ops->Submit(team, "destroy", id, [this, id] { return RunDestroy(id, "requested"); });
}

Status Lifecycle::RunDestroy(const std::string& id, const std::string& reason) {
  warm_.NoteActivity();
  Teardown(id);
  RETURN_IF_ERROR(d_.pool->DestroyRoot(id));
  // Its volumes are free for another writer; with a fleet's store, synced there first.
  // A failed sync leaves the newest copy here, recorded as this node's: logged, not fatal.
  if (d_.volumes) {
    if (Status v = d_.volumes->Release(id, d_.volumes->sync_on_destroy(), true); !v.ok()) LogWarn("node", v.ToString());
  }
  ASSIGN_OR_RETURN(store::Sandbox rec, d_.store->GetSandbox(id));
  rec.state = SandboxState::kDestroyed;
  rec.uid_slot = -1;
  if (reason != "requested") rec.error = reason;
  RETURN_IF_ERROR(d_.store->PutSandbox(rec));
  d_.live->UnmarkEnding(id);
  return Status::Ok();
}

Result<store::Sandbox> Lifecycle::SetTimeout(const std::string& team, const std::string& id, int64_t timeout_s) {
  ASSIGN_OR_RETURN(store::Sandbox rec, Get(team, id));
  if (rec.state != SandboxState::kRunning && rec.state != SandboxState::kCreating &&
      rec.state != SandboxState::kPaused) {
    return Conflict("sandbox " + id + " is " + std::string(store::StateName(rec.state)) +
                    "; timeouts apply to live sandboxes");
  }
  rec.timeout_s = timeout_s;
  rec.expires_at_ms = WallNowMs() + timeout_s * 1000;
  RETURN_IF_ERROR(d_.store->PutSandbox(rec));
  if (auto live = d_.live->Find(id)) live->expires_at_ms = rec.expires_at_ms;
  return rec;
}

Result<store::OperationRecord> Lifecycle::GetOperation(const std::string& team, const std::string& id) {
  auto op = d_.store->GetOperation(id);
  if (!op.ok() || op->team != team) return NotFound("operation " + id + " not found");
  return op;
}

Result<store::OperationRecord> Lifecycle::WaitOperation(const std::string& team, const std::string& id,
                                                        int64_t timeout_ms) {
  RETURN_IF_ERROR(GetOperation(team, id).status());
  return d_.ops->Wait(id, timeout_ms);
}

Status Lifecycle::SetState(const std::string& id, SandboxState state) {
  ASSIGN_OR_RETURN(store::Sandbox rec, d_.store->GetSandbox(id));
  rec.state = state;
  return d_.store->PutSandbox(rec);
}

void Lifecycle::Tick(int64_t now_ms) {
  FailLostGuests();
  auto expired = d_.live->ClaimEndingIf(
      [now_ms](const LiveSandbox& l) { return l.expires_at_ms > 0 && l.expires_at_ms <= now_ms; });
  for (const auto& l : expired) {
    const std::string id = l->id, team = l->team;
    auto rec = d_.store->GetSandbox(id);
    if (!rec.ok() || (rec->state != SandboxState::kRunning && rec->state != SandboxState::kPaused)) continue;
    if (rec->on_timeout == store::OnTimeout::kSuspend) {
      d_.audit->Record(team, id, "lifecycle", "timeout", {{"on_timeout", "suspend"}});
      auto op = d_.ops->Submit(team, "timeout", id, [this, id]() {
        Status st = RunSuspend(id);
        d_.live->UnmarkEnding(id);  // it may be resumed and time out again
        return st;
      });
      if (!op.ok()) LogError("node", op.status().ToString());
      continue;
    }
    rec->state = SandboxState::kDestroying;
    if (Status st = d_.store->PutSandbox(*rec); !st.ok()) LogError("node", st.ToString());
    d_.audit->Record(team, id, "lifecycle", "timeout", {{"on_timeout", store::OnTimeoutName(rec->on_timeout)}});
    auto op = d_.ops->Submit(team, "timeout", id, [this, id] { return RunDestroy(id, "timed out"); });
    if (!op.ok()) LogError("node", op.status().ToString());
  }
}

void Lifecycle::FailLostGuests() {
  auto lost = d_.live->ClaimEndingIf([](const LiveSandbox& l) { return l.guest->lost().has_value(); });
  for (const auto& l : lost) {
    const std::string id = l->id;
    const Status why = l->guest->lost().value_or(Internal("the guest channel closed"));
    auto rec = d_.store->GetSandbox(id);
    // Only a sandbox at rest is failed here: an operation in flight (a suspend, a snapshot, a
    // rollback) owns the live entry and reports the broken channel itself.
    if (!rec.ok() || (rec->state != SandboxState::kRunning && rec->state != SandboxState::kPaused)) {
      d_.live->UnmarkEnding(id);
      continue;
    }
    // spaced died or broke the protocol (a hostile guest can do either): nothing can reach the
    // sandbox any more. Its processes, network and root go, as for a failed create.
    const std::string team = rec->team;
    rec->state = SandboxState::kFailed;
    rec->error = "the sandbox's guest agent is gone (" + why.message() + ")";
    rec->uid_slot = -1;
    LogWarn("node", "failing " + id + ": " + rec->error);
    if (Status st = d_.store->PutSandbox(*rec); !st.ok()) LogError("node", st.ToString());
    d_.audit->Record(team, id, "lifecycle", "guest_lost", {{"error", why.message()}});
    auto op = d_.ops->Submit(team, "fail", id, [this, id]() {
      Teardown(id);
      Status st = d_.pool->DestroyRoot(id);
      d_.live->UnmarkEnding(id);
      return st;
    });
    if (!op.ok()) LogError("node", op.status().ToString());
  }
}

Status Lifecycle::Reconcile() {
  // 1. Every sandbox process of a previous run lost its channel when that run died; end what
  //    is left of them (cgroups, scratch dirs) before anything else.
  //    The vm runtime's VMMs died with the node (their reapers saw its alive pipe close);
  //    their cgroups and scratch dirs go here, and any VMM that outlived it with them.
  std::set<std::string> present;
  for (runtime::Runtime* rt : {static_cast<runtime::Runtime*>(d_.runtimes->ns()), d_.runtimes->vm()}) {
    if (rt == nullptr) continue;
    ASSIGN_OR_RETURN(std::set<std::string> ids, rt->ListPresent());
    for (const auto& id : ids) {
      if (Status st = rt->Destroy(id); !st.ok()) LogWarn("reconcile", st.ToString());
    }
    present.insert(ids.begin(), ids.end());
  }
  // 2. Operations that were in flight are over: their effects are converged below.
  ASSIGN_OR_RETURN(auto ops, d_.store->ListUnfinishedOperations());
  for (auto& op : ops) {
    // In a fleet the store holds every node's operations: only those on this node's
    // sandboxes were in flight here.
    auto target = d_.store->GetSandbox(op.target);
    if (target.ok() && target->node != d_.node_name) continue;
    op.state = store::OperationState::kFailed;
    op.error = "interrupted by a node restart";
    op.finished_at_ms = WallNowMs();
    RETURN_IF_ERROR(d_.store->PutOperation(op));
  }
  // 3. Converge each sandbox: running ones boot again over their root; half-created ones are
  //    failed; half-destroyed ones finish.
  ASSIGN_OR_RETURN(auto records, d_.store->ListLiveSandboxes());
  std::set<std::string> keep;
  int booted = 0, cleaned = 0;
  for (auto& rec : records) {
    if (rec.node != d_.node_name) continue;
    if (rec.state == SandboxState::kSuspended) continue;  // lives in the snapshot store, nothing on this node
    if (rec.state == SandboxState::kResuming) {
      // Interrupted while coming back: still suspended; a partial root goes in step 5.
      rec.state = SandboxState::kSuspended;
      RETURN_IF_ERROR(d_.store->PutSandbox(rec));
      continue;
    }
    // Interrupted while suspending: the root is deleted only after the export landed, so it
    // is still here and the sandbox simply runs on.
    if (rec.state == SandboxState::kSuspending) rec.state = SandboxState::kRunning;
    if (rec.state == SandboxState::kRunning || rec.state == SandboxState::kPaused) {
      nlohmann::json steps = nlohmann::json::object();
      Status st = Boot(&rec, &steps);
      // A paused sandbox comes back paused (its processes restarted, then frozen).
      if (st.ok() && rec.state == SandboxState::kPaused) st = d_.runtimes->For(rec.runtime)->Freeze(rec.id);
      if (st.ok()) {
        keep.insert(rec.id);
        RETURN_IF_ERROR(d_.store->PutSandbox(rec));
        d_.audit->Record(rec.team, rec.id, "lifecycle", "reboot", {{"reason", "node restart"}});
        ++booted;
        continue;
      }
      Teardown(rec.id);
      rec.state = SandboxState::kFailed;
      rec.error = "could not boot again after a node restart: " + st.message();
    } else if (rec.state == SandboxState::kDestroying) {
      rec.state = SandboxState::kDestroyed;
    } else {
      const std::string was(store::StateName(rec.state));
      rec.state = SandboxState::kFailed;
      rec.error = "interrupted by a node restart while " + was;
    }
    rec.uid_slot = -1;
    if (Status st = d_.pool->DestroyRoot(rec.id); !st.ok()) LogWarn("reconcile", st.ToString());
    RETURN_IF_ERROR(d_.store->PutSandbox(rec));
    ++cleaned;
  }
  // 4. Snapshots whose record never landed (a crash between the snapshot and its record).
  ASSIGN_OR_RETURN(auto snap_ids, d_.pool->ListSnapshots());
  for (const auto& sid : snap_ids) {
    auto snap = d_.store->GetSnapshot(sid);
    if (snap.ok() && snap->state != store::SnapshotState::kDeleted) continue;
    if (Status st = d_.pool->DeleteSnapshot(sid); !st.ok()) LogWarn("reconcile", st.ToString());
    ++cleaned;
  }
  // 5. Roots nobody owns any more.
  ASSIGN_OR_RETURN(auto roots, d_.pool->ListRoots());
  for (const auto& id : roots) {
    if (keep.count(id)) continue;
    if (Status st = d_.pool->DestroyRoot(id); !st.ok()) LogWarn("reconcile", st.ToString());
    ++cleaned;
  }
  LogInfo("reconcile", "booted " + std::to_string(booted) + " sandboxes again, cleaned " + std::to_string(cleaned) +
                           ", ended " + std::to_string(present.size()) + " leftover runtimes");
  return Status::Ok();
}

}  // namespace space::node
