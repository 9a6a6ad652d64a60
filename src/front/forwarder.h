// Forwarder: the API front's request handler. Each request the front has parsed (within its
// limits, from a client it has already timed) goes to the node over a Unix stream socket,
// re-serialized: only the method, the target, the end-to-end headers and a Content-Length
// body; hop-by-hop headers and the client's framing stay behind. Node connections are
// socketpairs whose other end went to the node over the connection channel
// (http/http_server.h); one that ends a whole response is kept for the next request (at most
// kMaxIdle, each for kIdleKeepNs, well inside the node's 60 s keep-alive). The node's answer comes back whole (Send) or, for a stream
// (server-sent events, Connect streams), piece by piece as the node writes it.
//
// Runs in the unprivileged front process (front.h). Handle is called from many connection
// threads at once.
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/beast/core/flat_buffer.hpp>

#include "common/result.h"
#include "http/http.h"

namespace space::front {

// The largest whole response the front relays (file downloads are the big ones); a larger
// one is refused with 502 rather than held in memory.
inline constexpr size_t kMaxRelayedBodyBytes = size_t{1} << 30;
inline constexpr size_t kMaxIdle = 64;
inline constexpr int64_t kIdleKeepNs = 20'000'000'000;
// A preview connection with no bytes either way for this long is closed.
inline constexpr int kRelayIdleMs = 600'000;

class Forwarder {
 public:
  // `channel`: the front's end of the connection channel to the node.
  explicit Forwarder(int channel) : channel_(channel) {}

  void Handle(api::Request& req, api::Responder& res);

 private:
  using NodeStream = boost::asio::generic::stream_protocol::socket;
  struct Idle {
    std::unique_ptr<NodeStream> stream;
    int64_t since_ns;
  };

  // A new stream to the node: one end of a fresh socketpair, the other end sent to the node.
  Result<std::unique_ptr<NodeStream>> Connect();
  // The node answered a preview request with its ingress upgrade: relays raw bytes between
  // the client and the node until both are done.
  void Relay(api::Responder& res, NodeStream& node, boost::beast::flat_buffer& buffer);
  std::unique_ptr<NodeStream> TakeIdle();  // null when none is kept
  void PutIdle(std::unique_ptr<NodeStream> stream);

  const int channel_;
  boost::asio::io_context io_;  // synchronous calls only: shared by every connection thread
  std::mutex send_mu_;
  std::mutex pool_mu_;
  std::vector<Idle> idle_;  // guarded by pool_mu_
};

}  // namespace space::front
