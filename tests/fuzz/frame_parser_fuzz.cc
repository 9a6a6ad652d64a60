// libFuzzer target: the node<->guest frame parser, fed arbitrary bytes in arbitrary splits
// (both ends treat the other's bytes as hostile).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "protocol/protocol.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  space::guest::FrameParser parser;
  std::string_view in(reinterpret_cast<const char*>(data), size);
  // The first byte picks the split size, so the fuzzer explores partial headers too.
  size_t step = size > 0 ? (data[0] % 17) + 1 : 1;
  for (size_t off = 0; off < in.size(); off += step) {
    if (!parser.Feed(in.substr(off, step)).ok()) return 0;
    while (auto frame = parser.Next()) {
      if (frame->payload.size() > space::guest::kMaxPayload) __builtin_trap();
    }
  }
  return 0;
}
