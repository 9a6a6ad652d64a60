// Host-name patterns shared by credentials (which hosts receive a secret) and egress profiles
// (which hosts a sandbox may reach). Pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"

namespace space::credentials {

// Accepts a canonical pattern: a lowercase DNS name ("api.github.com", ≤ 253 chars, labels
// 1..63 of [a-z0-9-] not starting or ending with '-', a non-numeric last label so an IPv4
// literal never passes as a name) or "*." followed by such a name with at least two labels.
// "*.com" is refused: one pattern would then cover a whole TLD. "localhost" and names under
// it are refused because they resolve to the gateway's own loopback. `field` names the JSON
// field in the error message.
Status ValidateHostPattern(std::string_view pattern, std::string_view field);

// True when `host` is `pattern`, or `pattern` is "*.suffix" and `host` is a subdomain of
// suffix at any depth (never the bare suffix). Case-insensitive; one trailing dot on either is
// ignored. A host with characters no DNS name has (e.g. '*', ' ', ':') never matches.
bool HostMatches(const std::string& pattern, const std::string& host);

}  // namespace space::credentials
