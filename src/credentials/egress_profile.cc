#include "credentials/egress_profile.h"

#include <arpa/inet.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstring>
#include <optional>
#include <set>

#include "credentials/credential.h"
#include "credentials/host_pattern.h"

namespace space::credentials {
namespace {

using nlohmann::json;

// An address family's bytes (4 or 16 used) plus a prefix length.
struct Net {
  int family = 0;  // AF_INET or AF_INET6
  std::array<uint8_t, 16> addr{};
  int prefix = 0;
  size_t Len() const { return family == AF_INET ? 4 : 16; }
};

std::optional<Net> ParseAddress(std::string_view text) {
  if (text.size() > 2 && text.front() == '[' && text.back() == ']') text = text.substr(1, text.size() - 2);
  if (text.empty() || text.size() >= INET6_ADDRSTRLEN) return std::nullopt;
  std::string s(text);
  Net n;
  if (inet_pton(AF_INET, s.c_str(), n.addr.data()) == 1) {
    n.family = AF_INET;
    n.prefix = 32;
    return n;
  }
  if (inet_pton(AF_INET6, s.c_str(), n.addr.data()) == 1) {
    n.family = AF_INET6;
    n.prefix = 128;
    static constexpr uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (std::memcmp(n.addr.data(), kMapped, 12) == 0) {  // ::ffff:a.b.c.d is a.b.c.d
      std::memmove(n.addr.data(), n.addr.data() + 12, 4);
      std::fill(n.addr.begin() + 4, n.addr.end(), 0);
      n.family = AF_INET;
      n.prefix = 32;
    }
    return n;
  }
  return std::nullopt;
}

// Whether the first `bits` bits of a and b agree.
bool PrefixEqual(const Net& a, const Net& b, int bits) {
  for (int i = 0; i < bits; ++i) {
    int mask = 0x80 >> (i % 8);
    if ((a.addr[i / 8] & mask) != (b.addr[i / 8] & mask)) return false;
  }
  return true;
}

bool Contains(const Net& net, const Net& addr) {
  return net.family == addr.family && PrefixEqual(net, addr, net.prefix);
}

// Aligned blocks overlap exactly when one contains the other: compare the shorter prefix.
bool Overlaps(const Net& a, const Net& b) {
  return a.family == b.family && PrefixEqual(a, b, std::min(a.prefix, b.prefix));
}

Net MustNet(const char* addr, int family, int prefix) {
  Net n;
  n.family = family;
  n.prefix = prefix;
  inet_pton(family, addr, n.addr.data());
  return n;
}

struct Blocked {
  Net net;
  const char* why;
};

const std::vector<Blocked>& BlockedRanges() {
  // Function-local static: built once, thread-safe, no non-POD global.
  static const std::vector<Blocked> kBlocked = {
      {MustNet("169.254.169.254", AF_INET, 32),
       "it covers the cloud metadata address 169.254.169.254, which hands out host credentials"},
      {MustNet("fd00:ec2::254", AF_INET6, 128),
       "it covers the cloud metadata address fd00:ec2::254, which hands out host credentials"},
      {MustNet("0.0.0.0", AF_INET, 8), "it covers 0.0.0.0/8 (\"this network\"), which reaches the host itself"},
      {MustNet("127.0.0.0", AF_INET, 8), "it covers loopback 127.0.0.0/8, which is the gateway host itself"},
      {MustNet("::1", AF_INET6, 128), "it covers loopback ::1, which is the gateway host itself"},
      {MustNet("::", AF_INET6, 128), "it covers the unspecified address ::"},
      {MustNet("169.254.0.0", AF_INET, 16),
       "it covers link-local 169.254.0.0/16 (host-local services, cloud metadata)"},
      {MustNet("fe80::", AF_INET6, 10), "it covers link-local fe80::/10 (host-local services)"},
      {MustNet("224.0.0.0", AF_INET, 4),
       "it covers multicast 224.0.0.0/4, which is not a destination a proxy can serve"},
      {MustNet("ff00::", AF_INET6, 8), "it covers multicast ff00::/8, which is not a destination a proxy can serve"},
      {MustNet("255.255.255.255", AF_INET, 32), "it covers the broadcast address"},
      {MustNet("::ffff:0:0", AF_INET6, 96), "it covers IPv4-mapped IPv6 addresses; write the IPv4 CIDR instead"},
  };
  return kBlocked;
}

// Reads back a CIDR that ValidateCidr produced. Rules built by hand that do not parse match
// nothing (fail closed).
std::optional<Net> ParseCanonicalCidr(const std::string& cidr) {
  size_t slash = cidr.find('/');
  if (slash == std::string::npos) return std::nullopt;
  std::optional<Net> net = ParseAddress(cidr.substr(0, slash));
  int prefix = -1;
  const char* end = cidr.data() + cidr.size();
  auto [ptr, ec] = std::from_chars(cidr.data() + slash + 1, end, prefix);
  if (!net || ec != std::errc() || ptr != end || prefix < 1 || prefix > net->prefix) return std::nullopt;
  net->prefix = prefix;
  return net;
}

Result<std::string> ValidateCidr(const std::string& text, const std::string& field) {
  size_t slash = text.find('/');
  if (slash == std::string::npos) return InvalidArgument(field + ": must be \"address/prefix\"");
  std::string_view plen = std::string_view(text).substr(slash + 1);
  if (plen.empty() || plen.size() > 3 ||
      !std::all_of(plen.begin(), plen.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
      (plen.size() > 1 && plen[0] == '0')) {
    return InvalidArgument(field + ": prefix length must be a decimal number");
  }
  Net net;
  std::string addr = text.substr(0, slash);
  if (inet_pton(AF_INET, addr.c_str(), net.addr.data()) == 1) {
    net.family = AF_INET;
  } else if (inet_pton(AF_INET6, addr.c_str(), net.addr.data()) == 1) {
    net.family = AF_INET6;
  } else {
    return InvalidArgument(field + ": \"" + addr.substr(0, 64) + "\" is not an IPv4 or IPv6 address");
  }
  net.prefix = std::stoi(std::string(plen));  // ≤ 3 digits, cannot throw
  int max = net.family == AF_INET ? 32 : 128;
  if (net.prefix > max) return InvalidArgument(field + ": prefix length must be 0.." + std::to_string(max));
  for (int i = net.prefix; i < max; ++i) {
    if (net.addr[i / 8] & (0x80 >> (i % 8))) {
      return InvalidArgument(field + ": bits beyond the /" + std::to_string(net.prefix) +
                             " prefix are set; write the network address");
    }
  }
  if (net.prefix == 0) {
    return InvalidArgument(field +
                           ": refused because it allows every address, including the host's own "
                           "and the cloud metadata service; list the networks actually needed");
  }
  for (const Blocked& b : BlockedRanges()) {
    if (Overlaps(net, b.net)) return InvalidArgument(field + ": refused because " + b.why);
  }
  // Canonical text, so equal rules compare equal and JSON round-trips.
  char buf[INET6_ADDRSTRLEN];
  inet_ntop(net.family, net.addr.data(), buf, sizeof buf);
  return std::string(buf) + "/" + std::to_string(net.prefix);
}

Result<EgressRule> ParseRule(const json& r, size_t index) {
  std::string where = "allow[" + std::to_string(index) + "]";
  if (!r.is_object()) return InvalidArgument(where + ": must be an object");
  EgressRule rule;
  bool has_host = false, has_cidr = false;
  for (const auto& [key, v] : r.items()) {
    std::string field = where + "." + key;
    if (key == "host") {
      if (!v.is_string()) return InvalidArgument(field + ": must be a string");
      rule.host = v.get<std::string>();
      RETURN_IF_ERROR(ValidateHostPattern(rule.host, field));
      has_host = true;
    } else if (key == "cidr") {
      if (!v.is_string()) return InvalidArgument(field + ": must be a string");
      ASSIGN_OR_RETURN(rule.cidr, ValidateCidr(v.get<std::string>(), field));
      has_cidr = true;
    } else if (key == "ports") {
      if (!v.is_array() || v.empty() || v.size() > kMaxPortsPerRule) {
        return InvalidArgument(field + ": must be an array of 1..64 ports (omit it for 80 and 443)");
      }
      std::set<uint16_t> seen;
      for (const auto& p : v) {
        bool valid = p.is_number_unsigned()
                         ? (p.get<uint64_t>() >= 1 && p.get<uint64_t>() <= 65535)
                         : (p.is_number_integer() && p.get<int64_t>() >= 1 && p.get<int64_t>() <= 65535);
        if (!valid) {
          return InvalidArgument(field + ": each port must be an integer 1..65535");
        }
        auto port = static_cast<uint16_t>(p.get<int64_t>());
        if (!seen.insert(port).second) return InvalidArgument(field + ": duplicate port " + std::to_string(port));
        rule.ports.push_back(port);
      }
    } else {
      return InvalidArgument(where + ": unknown field \"" + key.substr(0, 64) + "\"");
    }
  }
  if (has_host == has_cidr) return InvalidArgument(where + ": needs exactly one of \"host\" or \"cidr\"");
  return rule;
}

}  // namespace

Result<EgressProfile> ParseEgressProfile(const std::string& name, const json& body) {
  Status st = ValidateCredentialName(name);
  if (!st.ok()) return InvalidArgument("name: must match [a-z0-9][a-z0-9._-]{0,62}");
  if (!body.is_object()) return InvalidArgument("request body must be a JSON object");
  EgressProfile profile;
  profile.name = name;
  bool has_allow = false;
  try {  // Accessors are type-checked first; this only guards the boundary.
    for (const auto& [key, v] : body.items()) {
      if (key != "allow") return InvalidArgument("unknown field \"" + key.substr(0, 64) + "\"");
      if (!v.is_array()) return InvalidArgument("allow: must be an array of rules");
      if (v.size() > kMaxEgressRules) return InvalidArgument("allow: at most 256 rules");
      for (size_t i = 0; i < v.size(); ++i) {
        ASSIGN_OR_RETURN(EgressRule rule, ParseRule(v[i], i));
        profile.rules.push_back(std::move(rule));
      }
      has_allow = true;
    }
  } catch (const json::exception& e) {
    return InvalidArgument(std::string("malformed egress profile: ") + e.what());
  }
  if (!has_allow) return InvalidArgument("allow: is required");
  return profile;
}

json EgressProfileJson(const EgressProfile& profile) {
  json allow = json::array();
  for (const EgressRule& r : profile.rules) {
    json j = json::object();
    if (!r.host.empty()) j["host"] = r.host;
    if (!r.cidr.empty()) j["cidr"] = r.cidr;
    if (!r.ports.empty()) j["ports"] = r.ports;
    allow.push_back(std::move(j));
  }
  return json{{"name", profile.name}, {"allow", std::move(allow)}};
}

bool Allows(const std::vector<EgressProfile>& profiles, const std::string& host_or_ip, uint16_t port) {
  if (port == 0) return false;
  std::optional<Net> ip = ParseAddress(host_or_ip);
  for (const EgressProfile& p : profiles) {
    for (const EgressRule& r : p.rules) {
      bool port_ok = r.ports.empty() ? (port == 80 || port == 443)
                                     : std::find(r.ports.begin(), r.ports.end(), port) != r.ports.end();
      if (!port_ok) continue;
      if (ip) {
        if (r.cidr.empty()) continue;
        std::optional<Net> net = ParseCanonicalCidr(r.cidr);
        if (net && Contains(*net, *ip)) return true;
      } else if (!r.host.empty() && HostMatches(r.host, host_or_ip)) {
        return true;
      }
    }
  }
  return false;
}

}  // namespace space::credentials
