// libFuzzer target: the root broker's decoder of requests from the node (broker/protocol.h).
// The broker holds privileges the node gave up, so it treats every request as hostile: none
// may crash, hang or throw, and a request that decodes must encode back to one that decodes
// the same. The node's reply decoder runs on the same bytes.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "broker/protocol.h"

using namespace space::broker;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t fds = data[0] % 4;  // how many descriptors came with it
  std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  auto req = DecodeRequest(in, fds);
  if (req.ok()) {
    auto again = DecodeRequest(EncodeRequest(*req), FdsFor(req->op));
    if (!again.ok() || again->op != req->op || again->uid_slot != req->uid_slot || again->keep != req->keep ||
        again->send_buffer_bytes != req->send_buffer_bytes || again->ports.tcp != req->ports.tcp ||
        again->runtime != req->runtime || again->id != req->id || again->frozen != req->frozen ||
        again->limits.cpus != req->limits.cpus || again->limits.memory_bytes != req->limits.memory_bytes ||
        again->limits.pids_max != req->limits.pids_max || again->name != req->name ||
        again->read_only != req->read_only || again->present != req->present || again->source != req->source) {
      std::abort();
    }
  }
  (void)DecodeReply(in);
  return 0;
}
