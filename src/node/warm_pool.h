// Warm pools: the `--warm-pool base=4,busybox=8,base:vm=2` setting (how many pre-created
// sandboxes the node keeps per template and runtime) and the per-pool counters that /metrics
// shows.
//
// The pools themselves are WarmPools (node/warm_pools.h). Pure functions and a plain struct;
// WarmCounters is guarded by whoever owns it (WarmPools).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "common/result.h"

namespace space::node {

inline constexpr int kMaxWarmPerTemplate = 256;
inline constexpr int kMaxWarmTotal = 1024;
inline constexpr size_t kMaxWarmSpecBytes = 4096;

// Parses "pool=count[,pool=count...]" (whitespace around items allowed; "" = no pools). A pool
// is a template name ([a-z0-9][a-z0-9._-]{0,62}), for ns sandboxes, or NAME:vm for vm
// sandboxes of that template (NAME:ns is NAME); counts 0..kMaxWarmPerTemplate, at most
// kMaxWarmTotal in all; a pool may appear once. Keys are as WarmPoolKey makes them.
Result<std::map<std::string, int>> ParseWarmPoolSpec(std::string_view text);

// The pool of `template_name`'s sandboxes of one runtime: the name for ns, "NAME:vm" for vm
// (template names hold no ':').
std::string WarmPoolKey(const std::string& template_name, bool vm);
// The other way: the template name, and whether the pool holds vm sandboxes.
std::string WarmPoolTemplate(const std::string& key, bool* vm);

// The resources every pooled sandbox is started with: the API's defaults. A create asking for
// other cpus or disk_mb is adjusted at hand-out; one asking for other memory_mb is served cold,
// because /dev/shm is sized from memory at mount time (and a VM's RAM at boot). A vm create
// asking for other cpus is served cold too (its vCPUs were fixed at boot), and so is one with
// egress profiles (its NIC's host tap is made before its VMM).
inline constexpr double kWarmCpus = 1;
inline constexpr int64_t kWarmMemoryMb = 512;
inline constexpr int64_t kWarmDiskMb = 2048;

struct WarmCounters {
  int target = 0;          // configured size
  int ready = 0;           // pooled sandboxes waiting to be handed out
  int filling = 0;         // being created right now
  uint64_t hits = 0;       // creates served from the pool
  uint64_t misses = 0;     // creates for this template the pool could not serve
  uint64_t refills = 0;    // pooled sandboxes created
  uint64_t refill_failures = 0;
  uint64_t discarded = 0;  // pooled sandboxes found dead or failing at hand-out
};

// Prometheus text (with HELP/TYPE) for the pools, ordered by template name.
std::string WarmPoolMetricsText(const std::map<std::string, WarmCounters>& pools);

}  // namespace space::node
