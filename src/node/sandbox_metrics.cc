#include "node/sandbox_metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "common/clock.h"
#include "common/log.h"
#include "node/guest_limits.h"
#include "node/owned_sandbox.h"
#include "node/runtimes.h"
#include "storage/btrfs.h"

namespace space::node {
namespace {

using store::SandboxState;

// Under TCG a guest answers in milliseconds; a wedged one must not stall a GET for long.
constexpr int64_t kGuestLimitsMs = 2000;

std::string Mib(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return buf;
}

}  // namespace

Result<ResourceSample> SandboxMetrics::Sample(const std::string& team, const std::string& id) {
  ASSIGN_OR_RETURN(store::Sandbox rec, GetOwned(store_, team, id));
  if (rec.state != SandboxState::kRunning && rec.state != SandboxState::kPaused) {
    return Conflict("sandbox " + id + " is " + std::string(store::StateName(rec.state)) +
                    "; metrics need a running or paused sandbox");
  }
  std::shared_ptr<LiveSandbox> live = live_->Find(id);
  if (!live || live->runtime == nullptr) return Unavailable("sandbox " + id + " is not on this node right now");
  ASSIGN_OR_RETURN(runtime::ResourceUsage u, live->runtime->Usage(id));
  const double cpus = rec.resources.cpus;
  double pct = 0;
  {
    std::lock_guard<std::mutex> lock(live->usage_mu);
    const int64_t now = MonoNowNs();
    const uint64_t prev_cpu = live->last_sample_ns ? live->last_cpu_ns : 0;
    const int64_t since = live->last_sample_ns ? live->last_sample_ns : live->booted_mono_ns;
    if (now > since && u.cpu_ns >= prev_cpu) {
      pct = 100.0 * static_cast<double>(u.cpu_ns - prev_cpu) / static_cast<double>(now - since) / std::max(cpus, 0.01);
    }
    live->last_cpu_ns = u.cpu_ns;
    live->last_sample_ns = now;
  }
  auto disk = storage::QgroupExclusiveBytes(pool_->RootPath(id));
  ResourceSample s;
  s.at_ms = WallNowMs();
  s.cpu_used_pct = std::round(std::min(pct, 100.0) * 100) / 100;
  s.cpu_count = static_cast<int>(std::ceil(cpus));
  s.mem_used = u.memory_bytes;
  s.mem_total = static_cast<uint64_t>(rec.resources.memory_mb) << 20;
  s.mem_cache = u.cache_bytes;
  s.disk_used = disk.ok() ? *disk : 0;
  s.disk_total = RootQuotaBytes(rec.runtime, rec.resources);
  return s;
}

std::vector<LimitHit> SandboxMetrics::LimitsHit(const store::Sandbox& rec) {
  std::vector<LimitHit> out;
  if (rec.state != SandboxState::kRunning && rec.state != SandboxState::kPaused) return out;
  std::shared_ptr<LiveSandbox> live = live_->Find(rec.id);
  if (!live) return out;
  std::vector<std::shared_ptr<Process>> processes;
  {
    std::lock_guard<std::mutex> lock(live->mu);
    for (const auto& [pid, p] : live->processes) processes.push_back(p);
  }
  const int64_t memory_mb = rec.resources.memory_mb;
  if (live->runtime != nullptr) {
    if (auto u = live->runtime->Usage(rec.id); u.ok()) {
      if (u->oom_kills > 0) {
        out.push_back({"memory", u->oom_kills,
                       "memory limit of " + std::to_string(memory_mb) +
                           " MiB reached: the out-of-memory killer ended " + std::to_string(u->oom_kills) +
                           " process(es)"});
      }
      if (u->pids_max_hits > 0) {
        out.push_back({"pids", u->pids_max_hits,
                       "process limit of " +
                           std::to_string(runtime::PidsMaxFor(static_cast<uint64_t>(memory_mb) << 20)) +
                           " reached: " + std::to_string(u->pids_max_hits) + " fork(s) refused"});
      }
    }
  }
  // A VM's own kernel kills and fills where the host cannot see: the guest tells (a short wait;
  // a guest that does not answer has nothing reported). A paused VM's vCPUs do not run, so it
  // is not asked.
  if (rec.runtime == store::RuntimeKind::kVm && rec.state == SandboxState::kRunning) {
    if (auto g = GuestQueryLimits(live.get(), kGuestLimitsMs); !g.ok()) {
      LogWarn("metrics", g.status().ToString());
    } else {
      if (g->oom_kills > 0) {
        out.push_back({"memory", g->oom_kills,
                       "memory of " + std::to_string(memory_mb) + " MiB exhausted in the guest: its kernel's " +
                           "out-of-memory killer ended " + std::to_string(g->oom_kills) + " process(es)"});
      }
      if (g->disk_total > 0 && g->disk_avail <= g->disk_total / 64) {
        out.push_back({"disk", std::nullopt,
                       "the guest's disk of " + std::to_string(g->disk_total >> 20) + " MiB is full (" +
                           Mib(g->disk_avail) + " free); writes fail with ENOSPC"});
      }
    }
  }
  // A quota is a level, not an event: reported while the root is within 1/64 of it (btrfs
  // refuses a write before the last bytes are used, since it reserves ahead).
  const uint64_t disk_limit = RootQuotaBytes(rec.runtime, rec.resources);
  if (auto used = storage::QgroupExclusiveBytes(pool_->RootPath(rec.id));
      used.ok() && disk_limit > 0 && *used + disk_limit / 64 >= disk_limit) {
    out.push_back({"disk", std::nullopt,
                   "disk quota of " + std::to_string(disk_limit >> 20) + " MiB is full (" + Mib(*used) +
                       " written); writes fail with EDQUOT"});
  }
  // Output is capped per command; past the cap the guest counts it and drops it.
  uint64_t truncated = 0;
  for (const auto& p : processes) truncated += p->truncated() ? 1 : 0;
  if (truncated > 0) {
    out.push_back({"output", truncated,
                   std::to_string(truncated) + " command(s) wrote more than the " +
                       std::to_string(Process::kMaxRetainedBytes >> 20) +
                       " MiB of output kept per command; the rest was counted and dropped"});
  }
  return out;
}

}  // namespace space::node
