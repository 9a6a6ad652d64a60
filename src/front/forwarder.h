// Forwarder: the API front's request handler. Each request the front has parsed (within its
// limits, from a client it has already timed) goes to the node over a new Unix stream socket,
// handed to the node over the connection channel (api/http_server.h), re-serialized: only the
// method, the target, the end-to-end headers and a Content-Length body; hop-by-hop headers and
// the client's framing stay behind. The node's answer comes back whole (Send) or, for a stream
// (server-sent events, Connect streams), piece by piece as the node writes it.
//
// Runs in the unprivileged front process (front.h). Handle is called from many connection
// threads at once.
#pragma once

#include <mutex>

#include "api/http.h"
#include "common/unique_fd.h"

namespace space::front {

// The largest whole response the front relays (file downloads are the big ones); a larger
// one is refused with 502 rather than held in memory.
inline constexpr size_t kMaxRelayedBodyBytes = size_t{1} << 30;

class Forwarder {
 public:
  // `channel`: the front's end of the connection channel to the node.
  explicit Forwarder(int channel) : channel_(channel) {}

  void Handle(api::Request& req, api::Responder& res);

 private:
  // A new stream to the node: one end of a fresh socketpair, the other end sent to the node.
  Result<UniqueFd> Connect();

  const int channel_;
  std::mutex send_mu_;
};

}  // namespace space::front
