// Warm pools: per template, the node keeps sandboxes pre-created (root cloned, namespaces and
// cgroups made, spaced up and hello'd) and owned by nobody, and hands one out on create.
//
// A pooled sandbox is made with a fresh random sandbox id, so its hostname, root, cgroups and
// SPACE_SANDBOX_ID are already those of the sandbox it becomes; nobody saw the id before the
// hand-out. What a create chooses is applied at hand-out: cpus (cgroup write), disk_mb (qgroup
// limit), env and credential placeholders (given to every process by the node, below the
// request's own env), timeout, snapshot policy and egress (veth, gateway registration). A
// create asking for memory_mb other than the pool's is served cold: /dev/shm was sized from it.
//
// Pooled sandboxes have no store record. A crashed node's Reconcile ends every runtime it
// finds and removes every root without a live record, so they leave nothing behind; a clean
// Stop destroys them.
//
// One refill thread at nice 10 makes them one at a time. A refill costs what a cold create
// does (a btrfs snapshot commit, a new network namespace), so it waits for a quiet moment: no
// create in flight and no create, destroy or exec for kQuietMs. Under sustained load it yields
// at most kMaxYieldMs, so a busy node still refills, one sandbox at a time.
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>

#include "common/clock.h"
#include "common/log.h"
#include "common/nice.h"
#include "common/random.h"
#include "node/live.h"
#include "node/node.h"

namespace space::node {
namespace {

constexpr int kRefillNice = 10;
constexpr int64_t kMaxYieldMs = 200;
constexpr int64_t kQuietMs = 20;
constexpr int64_t kMinBackoffMs = 100;
constexpr int64_t kMaxBackoffMs = 30000;

// Names the process env sets from the user it runs as, whatever spaced's environment says
// (guest BuildEnvironment): a cold sandbox's create env never reaches a process under them.
bool IsPerUserEnv(const std::string& k) { return k == "HOME" || k == "USER" || k == "LOGNAME" || k == "SHELL"; }

}  // namespace

void Node::StartWarmPools() {
  if (config_.warm_pool.empty()) return;
  {
    std::lock_guard<std::mutex> lock(warm_mu_);
    for (const auto& [name, target] : config_.warm_pool) warm_counters_[name].target = target;
  }
  warm_thread_ = std::thread([this] { WarmLoop(); });
}

void Node::StopWarmPools() {
  {
    std::lock_guard<std::mutex> lock(warm_mu_);
    warm_stopping_ = true;
  }
  warm_cv_.notify_all();
  if (warm_thread_.joinable()) warm_thread_.join();
  std::map<std::string, std::vector<std::shared_ptr<WarmSandbox>>> ready;
  {
    std::lock_guard<std::mutex> lock(warm_mu_);
    ready.swap(warm_ready_);
    for (auto& [name, c] : warm_counters_) c.ready = 0;
  }
  size_t n = 0;
  for (auto& [name, v] : ready) {
    for (auto& w : v) {
      DestroyWarm(w);
      ++n;
    }
  }
  if (n > 0) LogInfo("warm", "destroyed " + std::to_string(n) + " pooled sandboxes");
}

std::string Node::WarmPoolMetrics() {
  std::lock_guard<std::mutex> lock(warm_mu_);
  return WarmPoolMetricsText(warm_counters_);
}

void Node::WarmLoop() {
  // Per-thread on Linux: only refills run at the lower priority.
  if (Status st = SetThreadNice(kRefillNice); !st.ok()) LogWarn("warm", st.ToString());
  std::map<std::string, int64_t> backoff_ms, retry_at_ms;
  for (;;) {
    std::string pick;
    {
      std::unique_lock<std::mutex> lock(warm_mu_);
      int64_t yield_since = -1;
      for (;;) {
        if (warm_stopping_) return;
        const int64_t now = MonoNowNs() / 1'000'000;
        // The pool furthest below its target (by fraction) whose retry time has come.
        pick.clear();
        double best = 2;
        int64_t next_retry = -1;
        for (const auto& [name, c] : warm_counters_) {
          if (c.target == 0 || c.ready + c.filling >= c.target) continue;
          if (retry_at_ms[name] > now) {
            if (next_retry < 0 || retry_at_ms[name] < next_retry) next_retry = retry_at_ms[name];
            continue;
          }
          double fill = static_cast<double>(c.ready + c.filling) / c.target;
          if (fill < best) {
            best = fill;
            pick = name;
          }
        }
        if (!pick.empty()) {
          const int64_t quiet_ms = now - last_activity_mono_ns_.load() / 1'000'000;
          if (creates_in_flight_ == 0 && quiet_ms >= kQuietMs) break;
          if (yield_since < 0) yield_since = now;
          if (now - yield_since >= kMaxYieldMs) break;  // under sustained load, one at a time
          warm_cv_.wait_for(lock, std::chrono::milliseconds(5));
          continue;
        }
        yield_since = -1;
        int64_t wait_ms = next_retry < 0 ? 1000 : std::clamp<int64_t>(next_retry - now, 1, 1000);
        warm_cv_.wait_for(lock, std::chrono::milliseconds(wait_ms));
      }
      ++warm_counters_[pick].filling;
    }
    Result<std::shared_ptr<WarmSandbox>> made = MakeWarm(pick);
    {
      std::lock_guard<std::mutex> lock(warm_mu_);
      WarmCounters& c = warm_counters_[pick];
      --c.filling;
      if (made.ok()) {
        warm_ready_[pick].push_back(*made);
        ++c.ready;
        ++c.refills;
        backoff_ms[pick] = 0;
        continue;
      }
      ++c.refill_failures;
      int64_t& b = backoff_ms[pick];
      b = b == 0 ? kMinBackoffMs : std::min(kMaxBackoffMs, b * 2);
      retry_at_ms[pick] = MonoNowNs() / 1'000'000 + b;
    }
    LogWarn("warm", "refill of " + pick + " failed (retry in " + std::to_string(backoff_ms[pick]) +
                        " ms): " + made.status().ToString());
  }
}

Result<std::shared_ptr<Node::WarmSandbox>> Node::MakeWarm(const std::string& template_name) {
  ASSIGN_OR_RETURN(storage::TemplateInfo tmpl, pool_->EnsureTemplate(template_name, [&](const std::string& l) {
                     LogInfo("template " + template_name, l);
                   }));
  store::SandboxRecord rec;
  rec.id = NewId("sbx");
  rec.template_name = template_name;
  rec.template_digest = tmpl.digest;
  rec.env_json = "{}";
  rec.egress_json = "[]";
  rec.policy_json = "{}";
  rec.resources_json =
      nlohmann::json{{"cpus", kWarmCpus}, {"memory_mb", kWarmMemoryMb}, {"disk_mb", kWarmDiskMb}}.dump();
  RETURN_IF_ERROR(pool_->CreateRoot(rec.id, tmpl.digest, static_cast<uint64_t>(kWarmDiskMb) << 20).status());
  nlohmann::json steps = nlohmann::json::object();
  std::shared_ptr<Live> live;
  if (Status st = Boot(&rec, &steps, &live); !st.ok()) {
    if (Status d = pool_->DestroyRoot(rec.id); !d.ok()) LogWarn("warm", d.ToString());
    return st;
  }
  auto warm = std::make_shared<WarmSandbox>();
  warm->template_name = template_name;
  warm->template_digest = tmpl.digest;
  warm->live = std::move(live);
  warm->ready_mono_ns = MonoNowNs();
  return warm;
}

std::shared_ptr<Node::WarmSandbox> Node::TakeWarm(const CreateRequest& req) {
  if (!req.from_snapshot.empty()) return nullptr;
  std::shared_ptr<WarmSandbox> out;
  std::vector<std::shared_ptr<WarmSandbox>> dead;
  {
    std::lock_guard<std::mutex> lock(warm_mu_);
    auto c = warm_counters_.find(req.template_name);
    if (c == warm_counters_.end() || c->second.target == 0) return nullptr;
    auto& ready = warm_ready_[req.template_name];
    if (req.memory_mb != kWarmMemoryMb) {
      ++c->second.misses;
      return nullptr;
    }
    while (!ready.empty()) {
      // Newest first: its pages are the likeliest to be still cached.
      std::shared_ptr<WarmSandbox> w = std::move(ready.back());
      ready.pop_back();
      --c->second.ready;
      if (!w->live->guest->alive()) {
        ++c->second.discarded;
        dead.push_back(std::move(w));
        continue;
      }
      out = std::move(w);
      ++c->second.hits;
      break;
    }
    if (!out) ++c->second.misses;
  }
  warm_cv_.notify_all();
  for (auto& w : dead) DestroyWarm(w);
  return out;
}

Status Node::HandOutWarm(store::SandboxRecord* rec, const CreateRequest& req, const std::shared_ptr<WarmSandbox>& warm,
                         nlohmann::json* steps) {
  const int64_t t0 = MonoNowNs();
  const std::shared_ptr<Live>& live = warm->live;
  bool registered = false;
  Status st = [&]() -> Status {
    rec->template_digest = warm->template_digest;
    rec->uid_slot = live->uid_slot;
    if (req.cpus != kWarmCpus) {
      runtime::Limits limits;
      limits.cpus = req.cpus;
      limits.memory_bytes = static_cast<uint64_t>(kWarmMemoryMb) << 20;
      limits.pids_max = runtime::PidsMaxFor(limits.memory_bytes);
      RETURN_IF_ERROR(runtime_->UpdateLimits(rec->id, limits));
    }
    if (req.disk_mb != kWarmDiskMb) {
      RETURN_IF_ERROR(pool_->SetRootDiskLimit(rec->id, static_cast<uint64_t>(req.disk_mb) << 20));
    }
    // The create's env (with credential placeholders), as a cold boot would give it to spaced.
    auto env = nlohmann::json::parse(rec->env_json, nullptr, false);
    if (env.is_object()) {
      for (auto& [k, v] : env.items()) {
        if (v.is_string() && !IsPerUserEnv(k)) live->base_env[k] = v.get<std::string>();
      }
    }
    if (HasEgress(*rec)) {
      for (const auto& [k, v] : kEgressTrustEnv) live->base_env[k] = v;
    }
    live->team = rec->team;
    live->expires_at_ms = rec->expires_at_ms;
    live->last_rolling_ms = WallNowMs();
    auto policy = nlohmann::json::parse(rec->policy_json, nullptr, false);
    if (policy.is_object()) live->rolling_every_ms = policy.value("every_s", int64_t{0}) * 1000;
    {
      std::lock_guard<std::mutex> lock(mu_);
      live_[rec->id] = live;
    }
    registered = true;
    if (HasEgress(*rec)) {
      const int64_t t = MonoNowNs();
      RETURN_IF_ERROR(AttachEgress(*rec, live.get(), live->init_pid));
      (*steps)["egress"] = static_cast<double>(MonoNowNs() - t) / 1e6;
    }
    return Status::Ok();
  }();
  if (!st.ok()) {
    {
      std::lock_guard<std::mutex> lock(warm_mu_);
      ++warm_counters_[warm->template_name].discarded;
    }
    if (registered) {
      TeardownLive(rec->id);
      if (Status d = pool_->DestroyRoot(rec->id); !d.ok()) LogWarn("warm", d.ToString());
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

Result<std::optional<std::pair<store::SandboxRecord, store::OperationRecord>>> Node::CreateFromWarm(
    store::SandboxRecord* rec, const CreateRequest& req, std::shared_ptr<WarmSandbox>* warm) {
  {
    std::lock_guard<std::mutex> lock(warm_mu_);
    ++creates_in_flight_;  // the refill thread yields to it
  }
  nlohmann::json steps = nlohmann::json::object();
  Status handed = HandOutWarm(rec, req, *warm, &steps);
  warm->reset();  // live now, or cleaned up by HandOutWarm
  {
    std::lock_guard<std::mutex> lock(warm_mu_);
    --creates_in_flight_;
  }
  last_activity_mono_ns_ = MonoNowNs();
  warm_cv_.notify_all();
  if (!handed.ok()) {
    LogWarn("warm", "hand-out of " + rec->id + " failed, creating it cold: " + handed.ToString());
    return std::optional<std::pair<store::SandboxRecord, store::OperationRecord>>();
  }
  const int64_t start = req.received_mono_ns ? req.received_mono_ns : MonoNowNs();
  rec->timings_json =
      nlohmann::json{{"create_ms", static_cast<double>(MonoNowNs() - start) / 1e6}, {"steps", steps}}.dump();
  rec->state = "running";
  Status recorded = store_->PutSandbox(*rec);
  Result<store::OperationRecord> op = recorded.ok() ? ops_->RecordDone(rec->team, "create", rec->id, Status::Ok())
                                                    : Result<store::OperationRecord>(recorded);
  if (!op.ok()) {
    // Nobody has seen the id: end the sandbox rather than leave one the store may not know.
    TeardownLive(rec->id);
    if (Status d = pool_->DestroyRoot(rec->id); !d.ok()) LogWarn("warm", d.ToString());
    if (recorded.ok()) {
      rec->state = "failed";
      rec->error = op.status().message();
      if (Status p = store_->PutSandbox(*rec); !p.ok()) LogError("warm", p.ToString());
    }
    return op.status();
  }
  Audit(rec->team, rec->id, "lifecycle", "create", {{"template", req.template_name}});
  return std::make_optional(std::make_pair(*rec, *op));
}

void Node::DestroyWarm(const std::shared_ptr<WarmSandbox>& warm) {
  const std::shared_ptr<Live>& live = warm->live;
  live->guest->Shutdown();
  if (Status st = runtime_->Destroy(live->id); !st.ok()) LogWarn("warm", st.ToString());
  uid_slots_.Release(live->uid_slot);
  if (Status st = pool_->DestroyRoot(live->id); !st.ok()) LogWarn("warm", st.ToString());
}

}  // namespace space::node
