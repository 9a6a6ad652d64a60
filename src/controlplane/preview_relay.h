// PreviewRelay: a fleet server's part in preview URLs. A request whose Host is a preview host
// (http/preview_host.h) goes, unauthenticated here (the port's token is the node's to check),
// to the node that holds the sandbox the host names; the rest of the connection is relayed as
// raw bytes both ways (the node's front does the same), so streams and WebSockets pass.
//
// Owned by the Router. Thread-safe.
#pragma once

#include <map>
#include <mutex>
#include <string>

#include "http/http.h"
#include "store/store.h"

namespace space::controlplane {

class PreviewRelay {
 public:
  PreviewRelay(store::Store* store, std::string domain, int64_t stale_ms)
      : store_(store), domain_(std::move(domain)), stale_ms_(stale_ms) {}

  // False when `req` is not for a preview host (nothing sent); true once answered.
  bool Handle(api::Request& req, api::Responder& res);

 private:
  // The URL of the live node holding the sandbox labelled `label`.
  Result<std::string> NodeFor(const std::string& label);

  store::Store* const store_;
  const std::string domain_;
  const int64_t stale_ms_;
  std::mutex mu_;
  std::map<std::string, std::string> labels_;  // label -> sandbox id; GUARDED_BY(mu_)
};

// Sends `req` to the node at `node_url` and relays the rest of the connection raw both ways
// (the node's answer included), ending after `idle_ms` without traffic: preview ports, and
// the terminal's WebSocket, whose node answers the handshake itself.
void RelayUpgrade(const std::string& node_url, const api::Request& req, api::Responder& res, int idle_ms);

// The request as it goes on to the node: method, target, end-to-end headers (Upgrade kept for
// a WebSocket), a Content-Length body. Exposed for tests.
std::string SerializeForNode(const api::Request& req);

}  // namespace space::controlplane
