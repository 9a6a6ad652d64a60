#include "controlplane/scheduler.h"

#include <algorithm>

namespace space::controlplane {
namespace {

bool HasTemplate(const store::NodeRecord& n, const std::string& name) {
  return std::find(n.templates.begin(), n.templates.end(), name) != n.templates.end();
}

}  // namespace

Result<store::NodeRecord> PickNode(const std::vector<store::NodeRecord>& nodes, const PlacementRequest& request,
                                   int64_t now_ms, int64_t stale_ms, const std::map<std::string, int64_t>& placed) {
  const store::NodeRecord* best = nullptr;
  double best_score = 0;
  for (const auto& n : nodes) {
    if (n.state != store::NodeState::kReady || n.name == request.exclude || now_ms - n.heartbeat_at_ms > stale_ms) continue;
    auto it = placed.find(n.name);
    int64_t free = n.capacity - n.live - (it == placed.end() ? 0 : it->second);
    if (free <= 0 || n.capacity <= 0) continue;
    double score = static_cast<double>(free) / static_cast<double>(n.capacity) +
                   (HasTemplate(n, request.template_name) ? kLocalityBonus : 0);
    if (best == nullptr || score > best_score || (score == best_score && n.name < best->name)) {
      best = &n;
      best_score = score;
    }
  }
  if (best == nullptr) return Unavailable("no node can take a sandbox now (none ready with free capacity)");
  return *best;
}

}  // namespace space::controlplane
