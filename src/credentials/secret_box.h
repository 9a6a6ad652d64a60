// SecretBox: authenticated encryption of credential secrets at rest (AES-256-GCM, OpenSSL).
//
// Sealed form: "v1:" + base64(nonce(12) || ciphertext || tag(16)), a printable string that a
// store column can hold. The nonce is random per seal (2^-32 collision risk after ~2^32 seals
// under one key, far beyond a node's lifetime of credential writes). `aad` is authenticated
// but not stored: callers pass the (team, credential name) the secret belongs to (see
// CredentialAad in credential.h), so a sealed value copied to another row fails to open.
// Stateless free functions; thread-safe.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "common/result.h"
#include "credentials/kek.h"

namespace space::credentials {

inline constexpr size_t kMaxSealedPlaintext = 64 * 1024;

// kInvalidArgument when the plaintext exceeds kMaxSealedPlaintext or `aad` exceeds 64 KiB;
// kInternal when OpenSSL fails.
Result<std::string> Seal(const Kek& kek, std::string_view plaintext, std::string_view aad);

// The plaintext, or kInvalidArgument for anything that does not authenticate under this key
// and aad (tampered, truncated, wrong key, wrong aad, unknown version). Never partial output.
Result<std::string> Open(const Kek& kek, std::string_view sealed, std::string_view aad);

// Standard base64 (RFC 4648 §4, with padding). Decode is strict: no whitespace, canonical

}  // namespace space::credentials
