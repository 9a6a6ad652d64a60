// NodeClient: how a fleet server talks to a node's API over HTTP/1.1 (Boost.Beast, one
// connection per call, `Connection: close`).
//
// Forward() relays a client's request to the node that owns its sandbox and streams the
// answer back (SSE and long downloads included). Call() is a whole request/response, used by
// the controllers acting for a team with the fleet token.
//
// Stateless; every function may run on any thread.
#pragma once

#include <map>
#include <string>
#include <utility>

#include "common/result.h"
#include "http/http.h"

namespace space::controlplane {

// "http://host:port" -> (host, port). Only plain http: nodes sit on the fleet's private network.
Result<std::pair<std::string, uint16_t>> ParseNodeUrl(const std::string& url);

// Relays `req` (method, raw target, headers minus hop-by-hop ones, body) to `node_url` and
// its response to `res`. Fails (unavailable) only when nothing reached the node: connect or
// send failed, so the caller may answer or try elsewhere. Once the node answered, its
// response is passed on as it comes, and a broken stream simply ends it.
Status Forward(const std::string& node_url, const api::Request& req, api::Responder& res);

struct CallResult {
  int status = 0;
  std::string body;
};

// One request to a node with `headers` (e.g. the fleet token and X-Space-Team); the response
// body is bounded to 16 MiB.
Result<CallResult> Call(const std::string& node_url, const std::string& method, const std::string& target,
                        const std::string& body, const std::map<std::string, std::string>& headers,
                        int timeout_ms = 30000);

}  // namespace space::controlplane
