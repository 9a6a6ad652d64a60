// libFuzzer target: the terminal's WebSocket reader (http/websocket.cc) on hostile client
// bytes, fed in pieces where the input's first byte says, and the subprotocol key parser.
// Nothing may crash or hang; every message handed out stays within the reader's bound.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "http/websocket.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  constexpr size_t kMax = 4096;
  space::api::WsReader reader(kMax);
  std::vector<space::api::WsMessage> out;
  size_t step = size > 0 ? data[0] % 64 + 1 : 1;
  for (size_t off = 0; off < in.size(); off += step) {
    if (!reader.Feed(in.substr(off, step), &out).ok()) break;
  }
  for (const auto& m : out) {
    if (m.payload.size() > kMax) std::abort();
  }
  (void)space::api::BearerFromSubprotocols(in);
  return 0;
}
