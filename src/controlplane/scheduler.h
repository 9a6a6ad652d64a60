// Scheduler: which node a new (or resumed) sandbox goes to. Pure functions over the nodes'
// last heartbeats, so every server replica decides the same way from the same rows.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "common/result.h"
#include "store/store.h"

namespace space::controlplane {

struct PlacementRequest {
  std::string template_name;  // nodes whose pool holds it are preferred (no template copy)
  std::string exclude;        // a node that must not be chosen (the one being drained)
};

// A node may take a sandbox when it is `ready`, its heartbeat is younger than `stale_ms` and
// it runs fewer sandboxes than its capacity. Among those: template locality first, then the
// most free capacity, then the name (deterministic). `placed` counts sandboxes this replica
// sent a node since that node's last heartbeat, which its `live` does not show yet.
// unavailable when no node qualifies.
Result<store::NodeRecord> PickNode(const std::vector<store::NodeRecord>& nodes, const PlacementRequest& request,
                                   int64_t now_ms, int64_t stale_ms,
                                   const std::map<std::string, int64_t>& placed = {});

}  // namespace space::controlplane
