// Per-team quotas (docs/keys.md, "Quotas"): limits on what a team holds at once, checked when
// a sandbox is created, forked, restored or resumed from suspension, and when a snapshot is
// taken. A quota is a team row's JSON {"sandboxes", "cpus", "memory_mb", "disk_mb",
// "snapshots"}; a missing member is no limit, and the admin team ("default") has none.
//
// Usage is read from the store at each check, so every node of a fleet sees the same counts.
// Two creates checked at the same moment may both pass: a team can exceed a quota by at most
// the creates in flight (no lock spans nodes). Pure functions over the store; thread-safe.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "store/store.h"

namespace space::store {

struct TeamUsage {
  int64_t sandboxes = 0;  // not ended and not suspended: what holds a node's resources
  double cpus = 0;
  int64_t memory_mb = 0;
  int64_t disk_mb = 0;
  int64_t snapshots = 0;  // stored, any state
  nlohmann::json ToJson() const;
};

// Validates a quotas object from a request: known members only, each a number >= 0 (cpus may
// be fractional, the others whole), or null to drop it. Returns it without the nulls.
Result<nlohmann::json> ParseQuotas(const nlohmann::json& quotas);

Result<TeamUsage> UsageOf(Store* store, const std::string& team);

// resource_exhausted (429) naming the quota `count` new sandboxes of `r` would pass; OK
// within quota, for a team without a row, and for the admin team.
Status AdmitSandbox(Store* store, const std::string& team, const Resources& r, int count = 1);
// The same for one more snapshot.
Status AdmitSnapshot(Store* store, const std::string& team);

}  // namespace space::store
