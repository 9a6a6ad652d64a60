// HttpServer: HTTP/1.1 over Boost.Beast, one thread per connection (bounded), keep-alive,
// bounded headers and bodies, and bounded time: an idle keep-alive connection, a request head
// that dribbles in (slowloris), a body slower than a floor rate, and a client that stops
// reading its response are all dropped, so slow clients cannot pin connection threads.
// Hands each parsed request to a handler with a Responder.
//
// Owned by the `space` binary. Start/Stop from one thread; handlers run concurrently.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include <condition_variable>
#include <mutex>
#include <set>
#include <vector>

#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "common/datagram.h"
#include "common/result.h"
#include "common/unique_fd.h"
#include "http/http.h"

namespace space::api {

using Handler = std::function<void(Request&, Responder&)>;

// The channel over which an API front (front/front.h) hands the node its connections: one
// datagram per connection, one byte and the connection's descriptor.
inline constexpr DatagramLimits kConnectionChannelLimits{16, 1, "API front channel"};
// The node answers a preview request to its front with `101` and `Upgrade: <this>`: the rest
// of the connection is the sandbox server's bytes, relayed raw both ways (ingress/ingress.h).
inline constexpr char kIngressUpgrade[] = "space-ingress";

struct HttpServerConfig {
  std::string address = "127.0.0.1";
  uint16_t port = 7722;            // 0: pick a free port
  int listen_fd = -1;  // >= 0: accept on this listening TCP socket (ListenTcp), owned from Start on
  size_t max_body_bytes = (100u << 20) + 4096;
  size_t max_header_bytes = 64 * 1024;
  int max_connections = 512;
  int idle_timeout_ms = 60'000;      // keep-alive: wait this long for the next request's first byte
  int header_timeout_ms = 10'000;    // then the whole request head must arrive within this
  int body_grace_ms = 30'000;        // the body gets this long plus its size at the floor rate:
  size_t body_min_bytes_per_s = 32 * 1024;
  int write_stall_timeout_ms = 60'000;  // a response write that makes no progress this long fails
};

// A listening TCP socket (close-on-exec) on address:port; port 0 picks a free one. Retries a
// port still held by an exiting predecessor for a few seconds.
Result<UniqueFd> ListenTcp(const std::string& address, uint16_t port);
// The port a listening socket is bound to.
Result<uint16_t> ListeningPort(int fd);

class HttpServer {
 public:
  HttpServer(HttpServerConfig config, Handler handler);
  ~HttpServer();

  // Any connected stream socket: TCP, or a Unix socket handed over by an API front.
  using Stream = boost::asio::generic::stream_protocol::socket;

  // Binds (or adopts config.listen_fd) and starts accepting. Returns the bound port.
  Result<uint16_t> Start();
  // Also serves every connection that arrives as a descriptor over `channel` (a SOCK_SEQPACKET
  // socket, kConnectionChannelLimits), until the channel's peer closes it or Stop. Needs no
  // Start: a node behind a front listens on nothing itself.
  void ServeChannel(UniqueFd channel);
  void Stop();

  // Connections accepted or handed over so far (each served on its own thread).
  uint64_t connections_served() const { return served_.load(); }

 private:
  void AcceptLoop();
  void Dispatch(Stream socket);
  void Serve(Stream& socket);

  const HttpServerConfig config_;
  const Handler handler_;
  boost::asio::io_context io_;
  std::unique_ptr<boost::asio::ip::tcp::acceptor> acceptor_;
  std::thread accept_thread_;
  // Stop wakes the accept thread through this eventfd. Not by shutdown(2) of the listening
  // socket: a front shares that socket with the node and every later front.
  UniqueFd accept_wake_;
  std::atomic<bool> stopping_{false};
  std::mutex conns_mu_;
  std::condition_variable conns_cv_;
  std::set<Stream*> open_;  // connections being served; guarded by conns_mu_
  std::atomic<uint64_t> served_{0};
  std::mutex channels_mu_;
  std::vector<int> channels_;                // guarded by channels_mu_
  std::vector<std::thread> channel_threads_;  // guarded by channels_mu_
};

}  // namespace space::api
