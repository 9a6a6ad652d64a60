// Kek: the 32-byte key-encryption key that seals credential secrets at rest.
//
// It lives outside the database (a root-only file, or the SPACE_KEK environment variable) so
// that a copy of the database alone never yields a secret. A Kek is move-only, zeroes its
// bytes on destruction, and is never logged. Thread-compatible; immutable after loading, so
// const access from many threads is safe.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/result.h"

namespace space::credentials {

class Kek {
 public:
  static constexpr size_t kSize = 32;

  explicit Kek(const std::array<uint8_t, kSize>& bytes) : bytes_(bytes) {}
  Kek(Kek&& other) noexcept;
  Kek& operator=(Kek&& other) noexcept;
  Kek(const Kek&) = delete;
  Kek& operator=(const Kek&) = delete;
  ~Kek();

  // Exactly 64 hex characters (either case); anything else is kInvalidArgument. The error
  // never echoes the input, which may be a near-miss of the real key.
  static Result<Kek> FromHex(std::string_view hex);

  const uint8_t* data() const { return bytes_.data(); }
  static constexpr size_t size() { return kSize; }

 private:
  std::array<uint8_t, kSize> bytes_{};
};

// Returns the node's KEK. `env_value` is getenv("SPACE_KEK") from the caller (a parameter so
// tests stay hermetic): when non-null it wins and must be 64 hex chars. Otherwise `path` is
// read; it must be a regular file (not a symlink) owned by root or the effective uid with
// mode 0600 or stricter, since a readable KEK unseals every stored secret. When `path` does
// not exist a fresh random key is written there atomically with mode 0600 (its directory is
// created 0700 if missing); a concurrent creator never clobbers a key already in place.
Result<Kek> LoadOrCreateKek(const std::string& path, const char* env_value);

}  // namespace space::credentials
