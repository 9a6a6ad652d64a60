// SandboxMetrics: what a live sandbox uses now, read from its cgroups and its root's qgroup,
// and the limits the kernel has enforced on it. Nothing is kept between samples but the CPU
// time of the previous one (in its LiveSandbox), from which the CPU percentage is taken.
//
// Owned by the Node; borrows the store, the live table and the pool. Thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "node/live_sandboxes.h"
#include "storage/pool.h"
#include "store/store.h"

namespace space::node {

struct ResourceSample {
  int64_t at_ms = 0;        // wall clock
  double cpu_used_pct = 0;  // since the previous sample (or boot), of the cpu limit
  int cpu_count = 1;        // the cpu limit, rounded up
  uint64_t mem_used = 0;
  uint64_t mem_total = 0;   // the memory limit
  uint64_t mem_cache = 0;   // page cache
  uint64_t disk_used = 0;   // exclusive bytes of its root: what it wrote beyond its template
  uint64_t disk_total = 0;  // the disk limit
};

// A limit the kernel enforced: "memory" (OOM kills), "pids" (forks refused), "disk" (quota
// full: a level, no count), "output" (commands whose output passed the retained cap).
struct LimitHit {
  std::string kind;
  std::optional<uint64_t> count;
  std::string message;
};

class SandboxMetrics {
 public:
  SandboxMetrics(store::Store* store, LiveSandboxes* live, storage::Pool* pool)
      : store_(store), live_(live), pool_(pool) {}

  // Valid while the sandbox runs or is paused on this node.
  Result<ResourceSample> Sample(const std::string& team, const std::string& id);
  // [] when none was hit or the sandbox is not live here. Never fails: a counter that cannot
  // be read is left out.
  std::vector<LimitHit> LimitsHit(const store::Sandbox& rec);

 private:
  store::Store* const store_;
  LiveSandboxes* const live_;
  storage::Pool* const pool_;
};

}  // namespace space::node
