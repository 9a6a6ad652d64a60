// Node::Metrics: a sandbox's resource use, sampled from its cgroups and its root's qgroup.
#include <cmath>
#include <cstdio>

#include "common/clock.h"
#include "node/live.h"
#include "node/node.h"
#include "storage/btrfs.h"

namespace space::node {

Result<nlohmann::json> Node::Metrics(const std::string& team, const std::string& id) {
  ASSIGN_OR_RETURN(store::SandboxRecord rec, Get(team, id));
  if (rec.state != "running" && rec.state != "paused") {
    return Conflict("sandbox " + id + " is " + rec.state + "; metrics need a running or paused sandbox");
  }
  std::shared_ptr<Live> live;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.find(id);
    if (it != live_.end()) live = it->second;
  }
  if (!live) return Unavailable("sandbox " + id + " is not on this node right now");
  ASSIGN_OR_RETURN(runtime::ResourceUsage u, RuntimeOf(id)->Usage(id));
  auto resources = nlohmann::json::parse(rec.resources_json, nullptr, false);
  double cpus = resources.is_object() ? resources.value("cpus", 1.0) : 1.0;
  int64_t memory_mb = resources.is_object() ? resources.value("memory_mb", int64_t{512}) : 512;
  int64_t disk_mb = resources.is_object() ? resources.value("disk_mb", int64_t{2048}) : 2048;
  double pct = 0;
  {
    std::lock_guard<std::mutex> lock(live->usage_mu);
    int64_t now = MonoNowNs();
    uint64_t prev_cpu = live->last_sample_ns ? live->last_cpu_ns : 0;
    int64_t since = live->last_sample_ns ? live->last_sample_ns : live->booted_mono_ns;
    if (now > since && u.cpu_ns >= prev_cpu) {
      pct = 100.0 * static_cast<double>(u.cpu_ns - prev_cpu) / static_cast<double>(now - since) / std::max(cpus, 0.01);
    }
    live->last_cpu_ns = u.cpu_ns;
    live->last_sample_ns = now;
  }
  // Exclusive bytes of the root's subvolume: what this sandbox wrote beyond its template.
  auto disk = storage::QgroupExclusiveBytes(pool_->RootPath(id));
  return nlohmann::json{
      {"timestamp", FormatRfc3339(WallNowMs())},
      {"timestampUnix", WallNowMs() / 1000},
      {"cpuUsedPct", std::round(std::min(pct, 100.0) * 100) / 100},
      {"cpuCount", static_cast<int>(std::ceil(cpus))},
      {"memUsed", u.memory_bytes},
      {"memTotal", static_cast<uint64_t>(memory_mb) << 20},
      {"memCache", u.cache_bytes},
      {"diskUsed", disk.ok() ? *disk : 0},
      {"diskTotal", static_cast<uint64_t>(disk_mb) << 20},
  };
}

namespace {

std::string Mib(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return buf;
}

}  // namespace

nlohmann::json Node::LimitsHit(const store::SandboxRecord& rec) {
  nlohmann::json out = nlohmann::json::array();
  if (rec.state != "running" && rec.state != "paused") return out;
  std::shared_ptr<Live> live;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.find(rec.id);
    if (it == live_.end()) return out;
    live = it->second;
  }
  std::vector<std::shared_ptr<Process>> processes;
  {
    std::lock_guard<std::mutex> lock(live->mu);
    for (const auto& [pid, p] : live->processes) processes.push_back(p);
  }
  auto resources = nlohmann::json::parse(rec.resources_json, nullptr, false);
  if (!resources.is_object()) resources = nlohmann::json::object();
  const int64_t memory_mb = resources.value("memory_mb", int64_t{512});
  const int64_t disk_mb = resources.value("disk_mb", int64_t{2048});
  if (auto u = RuntimeOf(rec.id)->Usage(rec.id); u.ok()) {
    if (u->oom_kills > 0) {
      out.push_back({{"kind", "memory"},
                     {"count", u->oom_kills},
                     {"message", "memory limit of " + std::to_string(memory_mb) +
                                     " MiB reached: the out-of-memory killer ended " +
                                     std::to_string(u->oom_kills) + " process(es)"}});
    }
    if (u->pids_max_hits > 0) {
      out.push_back({{"kind", "pids"},
                     {"count", u->pids_max_hits},
                     {"message", "process limit of " + std::to_string(runtime::PidsMaxFor(static_cast<uint64_t>(memory_mb) << 20)) +
                                     " reached: " + std::to_string(u->pids_max_hits) + " fork(s) refused"}});
    }
  }
  // A quota is a level, not an event: reported while the root is within 1/64 of it (btrfs
  // refuses a write before the last bytes are used, since it reserves ahead).
  const uint64_t disk_limit = static_cast<uint64_t>(disk_mb) << 20;
  if (auto used = storage::QgroupExclusiveBytes(pool_->RootPath(rec.id));
      used.ok() && disk_limit > 0 && *used + disk_limit / 64 >= disk_limit) {
    out.push_back({{"kind", "disk"},
                   {"count", nullptr},
                   {"message", "disk quota of " + std::to_string(disk_mb) + " MiB is full (" + Mib(*used) +
                                   " written); writes fail with EDQUOT"}});
  }
  // Output is capped per command; past the cap the guest counts it and drops it.
  int64_t truncated = 0;
  for (const auto& p : processes) truncated += p->truncated() ? 1 : 0;
  if (truncated > 0) {
    out.push_back({{"kind", "output"},
                   {"count", truncated},
                   {"message", std::to_string(truncated) + " command(s) wrote more than the " +
                                   std::to_string(Process::kMaxRetainedBytes >> 20) +
                                   " MiB of output kept per command; the rest was counted and dropped"}});
  }
  return out;
}

}  // namespace space::node
