// Unguessable identifiers from the kernel's CSPRNG (getrandom).
#pragma once

#include <string>
#include <string_view>

namespace space {

// `prefix` + "_" + 22 base62 characters (~131 bits).
std::string NewId(std::string_view prefix);
// `n` random bytes as lowercase hex.
std::string RandomHex(size_t n);

}  // namespace space
