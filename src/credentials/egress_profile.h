// Egress profiles: named, additive allowlists of where a sandbox may connect (docs/egress.md).
// A sandbox's effective policy is the union of the profiles chosen at creation; no profile
// means no egress. Parsing is strict because a profile is enforced by the gateway and
// firewall: a rule that parses loosely is a hole. Plain value types and pure functions.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/result.h"

namespace space::credentials {

inline constexpr size_t kMaxEgressRules = 256;
inline constexpr size_t kMaxPortsPerRule = 64;

// Exactly one of `host` (a host pattern, host_pattern.h) or `cidr` (canonical
// "address/prefix", host bits zero) is set.
struct EgressRule {
  std::string host;
  std::vector<uint16_t> ports;  // empty = 80 and 443
  std::string cidr;
};

struct EgressProfile {
  std::string name;  // [a-z0-9][a-z0-9._-]{0,62}
  std::vector<EgressRule> rules;
};

// Parses the body of PUT /v1/egress-profiles/{name}:
//   {"allow": [{"host": "api.github.com", "ports": [443]}, {"cidr": "203.0.113.0/24"}]}
// kInvalidArgument naming the rule index and field for: unknown fields, a rule with both or
// neither of host/cidr, ports outside 1..65535 or duplicated or > 64, > 256 rules, a malformed
// CIDR or one with bits set beyond its prefix, and CIDRs covering addresses no sandbox may
// reach (loopback, link-local and cloud metadata, multicast, broadcast, "this network",
// IPv4-mapped IPv6, or everything).
Result<EgressProfile> ParseEgressProfile(const std::string& name, const nlohmann::json& body);

// {"name": ..., "allow": [...]} in the request's shape; "ports" omitted when defaulted.
nlohmann::json EgressProfileJson(const EgressProfile& profile);

// Whether any profile lets a sandbox reach `host_or_ip`:`port`. An IP literal (IPv4, IPv6,
// or "[IPv6]"; IPv4-mapped IPv6 counts as IPv4) matches CIDR rules only, and a name matches
// host rules only, so a name rule never opens an address or vice versa. The gateway must
// still refuse a name that resolves into the blocked ranges (DNS rebinding).
bool Allows(const std::vector<EgressProfile>& profiles, const std::string& host_or_ip, uint16_t port);

}  // namespace space::credentials
