// Byte streams the gateway relays between: a plain TCP socket or TLS over one (OpenSSL), with
// every wait bounded by a deadline. Sockets are non-blocking; a Stream owns its fd.
#pragma once

#include <openssl/ssl.h>
#include <netinet/in.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "common/result.h"
#include "common/unique_fd.h"

namespace space::gateway {

class Stream {
 public:
  explicit Stream(UniqueFd fd);
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  int fd() const { return fd_.get(); }
  bool is_tls() const { return ssl_ != nullptr; }

  // TLS server handshake over this socket, presenting `ctx`'s certificate.
  Status AcceptTls(SSL_CTX* ctx, int timeout_ms);
  // TLS client handshake: SNI `host`, certificate verified against `ctx`'s trust store and
  // checked for `host`.
  Status ConnectTls(SSL_CTX* ctx, const std::string& host, int timeout_ms);

  // Up to `len` bytes; 0 at end of stream. Waits at most `timeout_ms` for the first byte
  // (0: do not wait); kDeadlineExceeded when nothing came.
  Result<size_t> Read(char* buf, size_t len, int timeout_ms);
  Status Write(std::string_view data, int timeout_ms);
  // No more writes from this side (TCP FIN, after a TLS close_notify).
  void ShutdownWrite();
  // Bytes already decrypted and waiting (TLS); poll() does not see them.
  bool HasBuffered() const;

 private:
  // Waits for the socket per the last SSL error; false on timeout or a fatal error.
  Status WaitSsl(int ret, int deadline_ms, const char* what);

  UniqueFd fd_;
  SSL* ssl_ = nullptr;
};

// Connects to `addr`:`port` within `timeout_ms`.
Result<std::unique_ptr<Stream>> ConnectTcp(in_addr addr, uint16_t port, int timeout_ms);

struct RelayCounts {
  uint64_t up = 0;    // client -> upstream
  uint64_t down = 0;  // upstream -> client
};

// Copies both ways until both sides have closed, one side fails, or neither moved a byte
// for `idle_ms`.
RelayCounts Relay(Stream& client, Stream& upstream, int idle_ms);

}  // namespace space::gateway
