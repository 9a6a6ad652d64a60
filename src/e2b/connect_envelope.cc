#include "e2b/connect_envelope.h"

namespace space::e2b {

std::string EncodeEnvelope(uint8_t flags, std::string_view payload) {
  std::string out;
  out.reserve(kEnvelopeHeaderSize + payload.size());
  uint32_t n = static_cast<uint32_t>(payload.size());
  out.push_back(static_cast<char>(flags));
  out.push_back(static_cast<char>((n >> 24) & 0xff));
  out.push_back(static_cast<char>((n >> 16) & 0xff));
  out.push_back(static_cast<char>((n >> 8) & 0xff));
  out.push_back(static_cast<char>(n & 0xff));
  out.append(payload);
  return out;
}

Result<std::vector<Envelope>> DecodeEnvelopes(std::string_view body, size_t max_payload, size_t max_envelopes) {
  std::vector<Envelope> out;
  size_t pos = 0;
  while (pos < body.size()) {
    if (out.size() >= max_envelopes) return InvalidArgument("connect: too many envelopes in the request");
    if (body.size() - pos < kEnvelopeHeaderSize) return InvalidArgument("connect: truncated envelope header");
    auto byte = [&](size_t i) { return static_cast<uint8_t>(body[pos + i]); };
    uint8_t flags = byte(0);
    // Compared in 64 bits: a hostile length near 2^32 must not wrap anything.
    uint64_t len = (uint64_t{byte(1)} << 24) | (uint64_t{byte(2)} << 16) | (uint64_t{byte(3)} << 8) | byte(4);
    if (flags & kEnvelopeCompressed) return InvalidArgument("connect: compressed envelopes are not supported");
    if (flags & ~kEnvelopeEndStream) return InvalidArgument("connect: unknown envelope flags");
    if (len > max_payload) return InvalidArgument("connect: envelope of " + std::to_string(len) + " bytes exceeds the limit");
    pos += kEnvelopeHeaderSize;
    if (body.size() - pos < len) return InvalidArgument("connect: truncated envelope payload");
    out.push_back({flags, std::string(body.substr(pos, static_cast<size_t>(len)))});
    pos += static_cast<size_t>(len);
  }
  return out;
}

Result<std::string> DecodeSingleRequestMessage(std::string_view body) {
  ASSIGN_OR_RETURN(std::vector<Envelope> envs, DecodeEnvelopes(body, kMaxEnvelopePayload, 2));
  if (envs.empty() || (envs[0].flags & kEnvelopeEndStream)) {
    return InvalidArgument("connect: the request carries no message");
  }
  if (envs.size() == 2 && !(envs[1].flags & kEnvelopeEndStream)) {
    return InvalidArgument("connect: a server-streaming request carries exactly one message");
  }
  return std::move(envs[0].payload);
}

}  // namespace space::e2b
