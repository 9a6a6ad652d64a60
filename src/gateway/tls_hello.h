// Reads the server name (SNI) from the first TLS record of a connection, the ClientHello,
// without consuming it (the gateway peeks), so the bytes can still be relayed untouched or
// handed to a TLS server. Hostile input: every length is checked against what remains.
#pragma once

#include <string>
#include <string_view>

namespace space::gateway {

inline constexpr size_t kMaxClientHello = 16384 + 5;

enum class HelloResult {
  kNeedMore,   // the first record is not complete yet
  kNotTls,     // not a TLS handshake record with a ClientHello
  kNoSni,      // a ClientHello without a (host_name) server name
  kSni,        // *sni holds the name, lowercased
};

HelloResult ParseClientHelloSni(std::string_view data, std::string* sni);

}  // namespace space::gateway
