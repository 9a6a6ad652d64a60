// Router: the request handler of `space server`, a stateless fleet replica. It authenticates
// each request against the shared store, decides which node serves it and relays it there:
// - create: the scheduler's pick (template locality, free capacity);
// - a sandbox's own routes (and its snapshots' and operations'): the node in its record, or,
//   when that node is lost, any ready node, which answers from the store (and, for `resume`
//   of a suspended sandbox, restores it from the shared snapshot store);
// - everything else (lists, credentials, profiles, audit, templates): any ready node, since
//   they read the shared store.
// - preview hosts (`<port>-<label>.<domain>`): relayed raw to the node holding the sandbox.
// The fleet's own routes are answered here: GET /v1/nodes, POST /v1/nodes/{name}/drain|ready
// and GET /v1/jobs (admin team only).
//
// Thread-safe: one instance serves every connection thread.
#pragma once

#include <map>
#include <mutex>
#include <string>

#include "controlplane/preview_relay.h"
#include "http/authenticator.h"
#include "http/http.h"
#include "store/store.h"

namespace space::controlplane {

struct RouterConfig {
  int64_t stale_ms = 15000;       // a node whose heartbeat is older takes no new sandboxes
  std::string admin_team = "default";  // the team whose keys may drain nodes
  std::string preview_domain = "localhost";  // preview hosts go to the sandbox's node (preview_relay.h)
};

class Router {
 public:
  Router(store::Store* store, api::RateLimit limit, RouterConfig config);
  void Handle(api::Request& req, api::Responder& res);

 private:
  void Route(api::Request& req, api::Responder& res);
  void Nodes(api::Request& req, api::Responder& res, const std::vector<std::string>& path);
  // The node that owns sandbox `id` for `req`'s team, or any ready one when it is gone.
  // not_found for another team's sandbox (ids never leak across teams).
  Result<store::NodeRecord> OwnerOf(const api::Request& req, const std::string& id, bool resume);
  // A ready node for a request; `placing`: a sandbox will start there (counted until the
  // node's next heartbeat shows it), not just a read answered from the store.
  Result<store::NodeRecord> AnyNode(const std::string& template_name, bool placing);
  void Relay(const store::NodeRecord& node, api::Request& req, api::Responder& res);

  store::Store* const store_;
  api::Authenticator auth_;
  const RouterConfig config_;
  PreviewRelay previews_;
  std::mutex mu_;
  // Sandboxes sent to each node since its heartbeat at `.first` (scheduler.h `placed`).
  std::map<std::string, std::pair<int64_t, int64_t>> placed_;  // GUARDED_BY(mu_)
};

}  // namespace space::controlplane
