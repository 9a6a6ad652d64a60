// The head of an HTTP/1.x request as the gateway reads it from a sandbox: strict, bounded,
// and rebuilt from parsed parts before it goes upstream, so no byte the gateway did not
// understand reaches the upstream in the head.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/result.h"

namespace space::gateway {

inline constexpr size_t kMaxRequestHead = 64 * 1024;
inline constexpr size_t kMaxHeaders = 100;

struct RequestHead {
  std::string method;
  std::string target;   // as sent: origin-form, absolute-form or authority-form (CONNECT)
  std::string version;  // "HTTP/1.1" or "HTTP/1.0"
  std::vector<std::pair<std::string, std::string>> headers;  // in order, values trimmed
  size_t head_size = 0;  // bytes of the head including the final CRLFCRLF

  // The value of the only header `name` (case-insensitive); empty when absent.
  std::string Get(std::string_view name) const;
  size_t Count(std::string_view name) const;
  void Remove(std::string_view name);
  void Set(const std::string& name, const std::string& value);
  std::string Serialize() const;
};

// Parses a complete head from the start of `data`. kNotFound when the head is not complete
// yet (and shorter than kMaxRequestHead); kInvalidArgument for anything malformed: obs-fold,
// bare CR or LF, control characters, header names that are not tokens, too many headers.
Result<RequestHead> ParseRequestHead(std::string_view data);

// Splits "host[:port]" or "[v6]:port"; `default_port` when there is no port. Lowercases the
// host. kInvalidArgument for an empty host or a bad port.
Result<std::pair<std::string, uint16_t>> SplitHostPort(std::string_view authority, uint16_t default_port);

bool EqualsIgnoreCase(std::string_view a, std::string_view b);

}  // namespace space::gateway
