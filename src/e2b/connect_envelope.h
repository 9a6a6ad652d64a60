// Connect protocol envelopes (connectrpc.com/docs/protocol, "Streaming"): the framing of
// server-streaming RPC bodies. Each envelope is flags:u8, length:u32 big-endian, payload.
//
// Request bodies come from clients and are hostile: the decoder bounds every length, refuses
// compressed frames (we never negotiate compression) and never reads past the input.
// Stateless and thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace space::e2b {

inline constexpr uint8_t kEnvelopeCompressed = 0x01;
inline constexpr uint8_t kEnvelopeEndStream = 0x02;
inline constexpr size_t kEnvelopeHeaderSize = 5;
// One request message of a streaming call (process start with its args and envs, a watch
// request) stays far below this.
inline constexpr size_t kMaxEnvelopePayload = 4u << 20;

struct Envelope {
  uint8_t flags = 0;
  std::string payload;
};

// The 5-byte header and the payload. Precondition: payload.size() < 2^32.
std::string EncodeEnvelope(uint8_t flags, std::string_view payload);

// Splits a whole request body into envelopes. Fails (invalid_argument) on a truncated header
// or payload, a payload over `max_payload`, a compressed flag or unknown flag bits, or more
// than `max_envelopes` envelopes.
Result<std::vector<Envelope>> DecodeEnvelopes(std::string_view body, size_t max_payload = kMaxEnvelopePayload,
                                              size_t max_envelopes = 16);

// The single message a server-streaming request carries: exactly one data envelope,
// optionally followed by an empty end-stream envelope.
Result<std::string> DecodeSingleRequestMessage(std::string_view body);

}  // namespace space::e2b
