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

// What holding the template is worth, in fractions of a node's capacity: a node without it
// (it would build or import the template first) is chosen once the nodes with it are this
// much fuller. Locality must not pin every sandbox to the first node that built a template.
inline constexpr double kLocalityBonus = 0.25;

// A node may take a sandbox when it is `ready`, its heartbeat is younger than `stale_ms` and
// it runs fewer sandboxes than its capacity. Among those, the highest score wins: the free
// fraction of its capacity, plus kLocalityBonus when its pool holds the template; ties go
// to the name (deterministic). `placed` counts sandboxes this replica sent a node since that
// node's last heartbeat, which its `live` does not show yet. unavailable when no node
// qualifies.
Result<store::NodeRecord> PickNode(const std::vector<store::NodeRecord>& nodes, const PlacementRequest& request,
                                   int64_t now_ms, int64_t stale_ms,
                                   const std::map<std::string, int64_t>& placed = {});

}  // namespace space::controlplane
