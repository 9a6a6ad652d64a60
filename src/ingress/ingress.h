// Ingress: the node's answer to a request whose Host names a preview port
// (`<port>-<label>.<preview domain>`, http/preview_host.h). It finds the sandbox and the
// opened port (node/ports.h), checks the port's token (header X-Space-Port-Token, or the
// cookie that opening `url?token=` sets, then redirects without it), applies the sandbox's
// rate, and relays: the request, re-serialized without SPACE's token (upstream_request.h),
// goes to the port over the sandbox's guest channel; the server's answer comes back as raw
// bytes, whatever their framing (streams, server-sent events), and an upgrade (WebSocket)
// relays both ways until either side ends. Errors before the relay are JSON {code, message}.
//
// The node's connection from its front is taken over for the relay: the node answers it with
// `101` + `Upgrade: space-ingress` (http/http_server.h) and the front relays raw bytes from
// then on. No process gains a route into the sandbox's network.
//
// Owned by `space dev` / `space node` beside api::Api. Thread-safe.
#pragma once

#include "http/http.h"
#include "node/ports.h"

namespace space::ingress {

class Ingress {
 public:
  explicit Ingress(node::Ports* ports) : ports_(ports) {}

  // False when the request is not for a preview host (nothing was sent); true once answered.
  bool Handle(api::Request& req, api::Responder& res);

 private:
  void Relay(api::Request& req, api::Responder& res, node::PreviewConnection& conn);

  node::Ports* const ports_;
};

}  // namespace space::ingress
