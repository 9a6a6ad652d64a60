// Unguessable identifiers from the kernel's CSPRNG (getrandom).
#pragma once

#include <string>
#include <string_view>

namespace space {

// `prefix` + "_" + 22 base62 characters (~131 bits).
std::string NewId(std::string_view prefix);
// `n` random bytes as lowercase hex.
std::string RandomHex(size_t n);
// A MAC for a VM's NIC: QEMU's prefix 52:54:00 (locally administered, unicast), the rest
// random, lower-case: "52:54:00:xx:xx:xx".
std::string RandomGuestMac();

}  // namespace space
