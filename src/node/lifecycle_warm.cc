// Lifecycle and the warm pools: making a pooled sandbox, handing one out to a create, ending
// one. The pools themselves (counts, refill pacing) are WarmPools.
//
// A pooled sandbox is made with a fresh random sandbox id, so its hostname, root, cgroups and
// SPACE_SANDBOX_ID are already those of the sandbox it becomes; nobody saw the id before the
// hand-out. What a create chooses is applied at hand-out: cpus (cgroup write), disk_mb (qgroup
// limit), env and credential placeholders (given to every process by the node, below the
// request's own env), timeout, snapshot policy and egress (veth, gateway registration). A
// create asking for memory_mb other than the pool's is served cold: /dev/shm was sized from it.
//
// A vm pool (`--warm-pool base:vm=2`) holds VMs restored from the template's checkpoint (or
// booted, without one) with no NIC backend: a vm create with egress profiles, or asking for
// other cpus, memory_mb or disk_mb, is served cold (its tap is made before its VMM; vCPUs and
// RAM are fixed at boot; its disk was grown to the pool's disk_mb).
//
// Pooled sandboxes have no store record. A crashed node's Reconcile ends every runtime it finds
// and removes every root without a live record, so they leave nothing behind; a clean Stop
// destroys them.
#include "common/clock.h"
#include "common/log.h"
#include "common/random.h"
#include "node/lifecycle.h"
#include "node/runtimes.h"

namespace space::node {
namespace {

// Names the process env sets from the user it runs as, whatever spaced's environment says
// (guest BuildEnvironment): a cold sandbox's create env never reaches a process under them.
bool IsPerUserEnv(const std::string& k) { return k == "HOME" || k == "USER" || k == "LOGNAME" || k == "SHELL"; }

}  // namespace

Result<std::shared_ptr<WarmSandbox>> Lifecycle::MakeWarm(const std::string& pool) {
  bool vm = false;
  const std::string template_name = WarmPoolTemplate(pool, &vm);
  if (vm && !d_.runtimes->vm()) return Unavailable("warm pool " + pool + ": this node has no vm runtime");
  ASSIGN_OR_RETURN(storage::TemplateInfo tmpl, d_.pool->EnsureTemplate(template_name, [&](const std::string& l) {
    LogInfo("template " + template_name, l);
  }));
  store::Sandbox rec;
  rec.id = NewId("sbx");
  rec.template_name = template_name;
  rec.runtime = vm ? store::RuntimeKind::kVm : store::RuntimeKind::kNs;
  rec.template_digest = tmpl.digest;
  rec.resources = {.cpus = kWarmCpus, .memory_mb = kWarmMemoryMb, .disk_mb = kWarmDiskMb};
  RETURN_IF_ERROR(d_.pool->CreateRoot(rec.id, tmpl.digest, RootQuotaBytes(rec.runtime, rec.resources)).status());
  nlohmann::json steps = nlohmann::json::object();
  std::shared_ptr<LiveSandbox> live;
  if (Status st = Boot(&rec, &steps, &live); !st.ok()) {
    if (Status d = d_.pool->DestroyRoot(rec.id); !d.ok()) LogWarn("warm", d.ToString());
    return st;
  }
  auto warm = std::make_shared<WarmSandbox>();
  warm->pool = pool;
  warm->template_digest = tmpl.digest;
  warm->live = std::move(live);
  warm->ready_mono_ns = MonoNowNs();
  return warm;
}

void Lifecycle::DestroyWarm(const std::shared_ptr<WarmSandbox>& warm) {
  const std::shared_ptr<LiveSandbox>& live = warm->live;
  live->guest->Shutdown();
  if (Status st = live->runtime->Destroy(live->id); !st.ok()) LogWarn("warm", st.ToString());
  d_.uid_slots->Release(live->uid_slot);
  if (Status st = d_.pool->DestroyRoot(live->id); !st.ok()) LogWarn("warm", st.ToString());
}

Status Lifecycle::HandOut(store::Sandbox* rec, const CreateRequest& req, const std::shared_ptr<WarmSandbox>& warm,
                          nlohmann::json* steps) {
  const int64_t t0 = MonoNowNs();
  const std::shared_ptr<LiveSandbox>& live = warm->live;
  bool registered = false;
  Status st = [&]() -> Status {
    rec->template_digest = warm->template_digest;
    rec->uid_slot = live->uid_slot;
    if (req.resources.cpus != kWarmCpus) {
      runtime::Limits limits;
      limits.cpus = req.resources.cpus;
      limits.memory_bytes = static_cast<uint64_t>(kWarmMemoryMb) << 20;
      limits.pids_max = runtime::PidsMaxFor(limits.memory_bytes);
      RETURN_IF_ERROR(live->runtime->UpdateLimits(rec->id, limits));
    }
    if (req.resources.disk_mb != kWarmDiskMb) {
      RETURN_IF_ERROR(d_.pool->SetRootDiskLimit(rec->id, RootQuotaBytes(rec->runtime, req.resources)));
    }
    // The create's env (with credential placeholders), as a cold boot would give it to spaced.
    for (const auto& [k, v] : rec->env) {
      if (!IsPerUserEnv(k)) live->base_env[k] = v;
    }
    if (rec->has_egress()) {
      for (const auto& [k, v] : kEgressTrustEnv) live->base_env[k] = v;
    }
    live->team = rec->team;
    live->expires_at_ms = rec->expires_at_ms;
    live->last_rolling_ms = WallNowMs();
    live->rolling_every_ms = rec->policy.every_s * 1000;
    d_.live->Insert(live);
    registered = true;
    if (rec->has_egress()) {
      if (rec->runtime == store::RuntimeKind::kVm) return Internal("a pooled vm sandbox cannot take egress profiles");
      if (!d_.egress)
        return Unavailable("sandbox " + rec->id + " has egress profiles but egress is disabled on this node");
      const int64_t t = MonoNowNs();
      RETURN_IF_ERROR(d_.egress->Attach(*rec, live.get(), live->init_pid));
      (*steps)["egress"] = static_cast<double>(MonoNowNs() - t) / 1e6;
    }
    return Status::Ok();
  }();
  if (!st.ok()) {
    warm_.CountDiscarded(warm->pool);
    if (registered) {
      Teardown(rec->id);
      if (Status d = d_.pool->DestroyRoot(rec->id); !d.ok()) LogWarn("warm", d.ToString());
    } else {
      DestroyWarm(warm);
    }
    rec->uid_slot = -1;
    return st;
  }
  // The step that says this create was served from the pool, and what the hand-out cost.
  (*steps)["warm_pool"] = static_cast<double>(MonoNowNs() - t0) / 1e6;
  return Status::Ok();
}

Result<std::optional<SandboxAndOp>> Lifecycle::CreateFromWarm(store::Sandbox* rec, const CreateRequest& req,
                                                              std::shared_ptr<WarmSandbox>* warm) {
  warm_.CreateStarted();  // the refill thread yields to it
  nlohmann::json steps = nlohmann::json::object();
  Status handed = HandOut(rec, req, *warm, &steps);
  warm->reset();  // live now, or cleaned up by HandOut
  warm_.CreateFinished();
  if (!handed.ok()) {
    LogWarn("warm", "hand-out of " + rec->id + " failed, creating it cold: " + handed.ToString());
    return std::optional<SandboxAndOp>();
  }
  const int64_t start = req.received_mono_ns ? req.received_mono_ns : MonoNowNs();
  rec->timings = nlohmann::json{{"create_ms", static_cast<double>(MonoNowNs() - start) / 1e6}, {"steps", steps}};
  rec->state = store::SandboxState::kRunning;
  Status recorded = d_.store->PutSandbox(*rec);
  Result<store::OperationRecord> op = recorded.ok() ? d_.ops->RecordDone(rec->team, "create", rec->id, Status::Ok())
                                                    : Result<store::OperationRecord>(recorded);
  if (!op.ok()) {
    // Nobody has seen the id: end the sandbox rather than leave one the store may not know.
    Teardown(rec->id);
    if (Status d = d_.pool->DestroyRoot(rec->id); !d.ok()) LogWarn("warm", d.ToString());
    if (recorded.ok()) {
      rec->state = store::SandboxState::kFailed;
      rec->error = op.status().message();
      if (Status p = d_.store->PutSandbox(*rec); !p.ok()) LogError("warm", p.ToString());
    }
    return op.status();
  }
  d_.audit->Record(rec->team, rec->id, "lifecycle", "create", {{"template", req.template_name}});
  return std::make_optional(std::make_pair(*rec, *op));
}

}  // namespace space::node
