// Preview hosts: `<port>-<label>.<preview domain>[:<listen port>]`, the Host of a request
// for a port inside a sandbox (node/ports.h). Pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace space::api {

struct PreviewHost {
  int64_t port = 0;   // 1..65535
  std::string label;  // lower case, [a-z0-9_-], 1..63 characters (common/ids.h SandboxHostLabel)
};

// The preview port and sandbox label a Host header names under `domain`, or nullopt when it
// names none (the API's own host, another domain, a malformed label). Case-insensitive.
std::optional<PreviewHost> ParsePreviewHost(std::string_view host, std::string_view domain);

}  // namespace space::api
