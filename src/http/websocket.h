// WebSocket (RFC 6455), server side, over a blocking connected socket: the handshake's accept
// key, a bounded incremental reader of client frames, and a connection whose one reader and
// one writer may run on two threads at once (the terminal: keystrokes in while output goes
// out). Beast's websocket stream allows that only through an async strand, which the
// thread-per-connection server does not have; the protocol's server side is small.
//
// Every client frame is hostile: it must be masked, carry no reserved bits, keep control
// frames short and unfragmented, and no message may exceed the reader's bound.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/mutex.h"
#include "common/result.h"

namespace space::api {

enum class WsOpcode : uint8_t { kContinuation = 0, kText = 1, kBinary = 2, kClose = 8, kPing = 9, kPong = 10 };

struct WsMessage {
  WsOpcode opcode = WsOpcode::kBinary;  // kText, kBinary, kClose, kPing or kPong
  std::string payload;                  // a data message reassembled from its fragments
};

// The Sec-WebSocket-Accept value for a client's Sec-WebSocket-Key.
std::string WebSocketAccept(std::string_view key);

// True for a Sec-WebSocket-Key: base64 of 16 bytes.
bool IsWebSocketKey(std::string_view key);

// The API key a browser offers as the subprotocol `space.bearer.<base64url key>` in a
// Sec-WebSocket-Protocol header (a browser's WebSocket cannot send Authorization); "" when
// there is none or it does not decode to a printable key.
std::string BearerFromSubprotocols(std::string_view header);

// For a WebSocket upgrade without Authorization: takes the key from its subprotocols
// (BearerFromSubprotocols) as `Authorization: Bearer <key>`, so it authenticates as any call.
struct Request;
void AdoptWebSocketBearer(Request& req);

// One unmasked frame with FIN set, as a server sends it.
std::string EncodeWsFrame(WsOpcode opcode, std::string_view payload);

// Reassembles client frames into messages. Fails (invalid_argument, or payload_too_large past
// `max_message_bytes`) on the first protocol violation; the connection must then close.
class WsReader {
 public:
  explicit WsReader(size_t max_message_bytes) : max_message_bytes_(max_message_bytes) {}

  // Takes more bytes from the client and appends each message they complete to `out`.
  Status Feed(std::string_view bytes, std::vector<WsMessage>* out);

 private:
  // Parses one frame from the front of buf_; false when it is not all here yet.
  Result<bool> TakeFrame(std::vector<WsMessage>* out);

  const size_t max_message_bytes_;
  std::string buf_;      // bytes not yet parsed
  std::string partial_;  // a fragmented data message so far
  bool in_message_ = false;
  WsOpcode partial_opcode_ = WsOpcode::kBinary;
};

// A WebSocket on a connected socket whose handshake is done. Send may be called from any
// thread (frames never interleave); Read from one thread at a time. Pings are answered and
// a client's close is echoed inside Read.
class WsConnection {
 public:
  WsConnection(int fd, size_t max_message_bytes, std::string leftover = "")
      : fd_(fd), reader_(max_message_bytes), pending_(std::move(leftover)) {}

  // The next text or binary message. `timeout_ms` bounds the wait for bytes (deadline_exceeded);
  // a close from the client, its hang-up or a protocol violation is an error (the latter also
  // closes with 1002 or 1009).
  Result<WsMessage> Read(int timeout_ms);
  Status Send(WsOpcode opcode, std::string_view payload);
  // Sends a close frame (once) with `code` and a short reason.
  void Close(uint16_t code, std::string_view reason);

 private:
  const int fd_;
  WsReader reader_;
  std::string pending_;            // bytes read before the reader saw them
  std::vector<WsMessage> queued_;  // parsed messages not yet returned
  size_t next_queued_ = 0;
  Mutex send_mu_;
  bool closed_ GUARDED_BY(send_mu_) = false;
};

}  // namespace space::api
