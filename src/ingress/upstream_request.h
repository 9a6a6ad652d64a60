// The request a preview port's server receives: the client's, re-serialized by the node
// (the front already parsed it whole, within its limits), without what is SPACE's: the port
// token (header, cookie, query), hop-by-hop headers and the client's framing. Pure functions.
#pragma once

#include <optional>
#include <string>

#include "http/http.h"

namespace space::ingress {

inline constexpr char kTokenHeader[] = "x-space-port-token";
inline constexpr char kTokenCookie[] = "space_port_token";
inline constexpr char kTokenQuery[] = "token";

// The token the client presented: the header, else the cookie; "" when neither.
std::string PresentedToken(const api::Request& req);
// `cookie` without the token's pair ("" when nothing else is left).
std::string CookieWithoutToken(const std::string& cookie);
// The request target without the `token` query parameter (the redirect after ?token=).
std::string TargetWithoutToken(const std::string& target);
// True for a request that asks to switch protocols (a WebSocket).
bool IsUpgrade(const api::Request& req);
// The bytes sent to the sandbox's server. A plain request asks it to close after answering
// (one request per preview connection); an upgrade keeps Upgrade and Connection.
std::string UpstreamRequest(const api::Request& req, const std::string& host);

}  // namespace space::ingress
