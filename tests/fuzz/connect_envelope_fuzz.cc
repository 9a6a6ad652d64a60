// libFuzzer target: the E2B Connect envelope decoder on request bodies from clients. Decoding
// must never read past the input, and what decodes must re-encode to the bytes it came from.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "e2b/connect_envelope.h"

using namespace space::e2b;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  auto envs = DecodeEnvelopes(in, 1 << 16, 16);
  if (envs.ok()) {
    std::string again;
    for (const auto& e : *envs) {
      if (e.payload.size() > (1 << 16) || (e.flags & kEnvelopeCompressed)) std::abort();
      again += EncodeEnvelope(e.flags, e.payload);
    }
    if (again != in) std::abort();
  }
  auto one = DecodeSingleRequestMessage(in);
  if (one.ok() && one->size() > in.size()) std::abort();
  return 0;
}
