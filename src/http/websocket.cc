#include "http/websocket.h"

#include <openssl/sha.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>

#include "common/base64.h"
#include "http/http.h"

namespace space::api {
namespace {

constexpr char kAcceptGuid[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
// A client that reads nothing for this long has gone: a write that makes no progress fails.
constexpr int kWriteStallMs = 30'000;
constexpr uint16_t kProtocolError = 1002;
constexpr uint16_t kTooBig = 1009;

bool IsControl(WsOpcode op) { return static_cast<uint8_t>(op) >= 8; }

bool KnownOpcode(uint8_t op) { return op <= 2 || (op >= 8 && op <= 10); }

}  // namespace

std::string WebSocketAccept(std::string_view key) {
  std::string s = std::string(key) + kAcceptGuid;
  unsigned char digest[SHA_DIGEST_LENGTH];
  SHA1(reinterpret_cast<const unsigned char*>(s.data()), s.size(), digest);
  return Base64Encode(std::string_view(reinterpret_cast<const char*>(digest), sizeof digest));
}

bool IsWebSocketKey(std::string_view key) {
  if (key.size() != 24) return false;
  auto raw = Base64Decode(key);
  return raw.ok() && raw->size() == 16;
}

std::string BearerFromSubprotocols(std::string_view header) {
  constexpr std::string_view kPrefix = "space.bearer.";
  while (!header.empty()) {
    size_t comma = header.find(',');
    std::string_view t = header.substr(0, comma);
    header = comma == std::string_view::npos ? std::string_view() : header.substr(comma + 1);
    while (!t.empty() && t.front() == ' ') t.remove_prefix(1);
    while (!t.empty() && t.back() == ' ') t.remove_suffix(1);
    if (t.substr(0, kPrefix.size()) != kPrefix || t.size() > kPrefix.size() + 512) continue;
    std::string b64(t.substr(kPrefix.size()));
    for (char& c : b64) {
      if (c == '-') c = '+';
      if (c == '_') c = '/';
    }
    while (b64.size() % 4 != 0) b64 += '=';
    auto key = Base64Decode(b64);
    if (!key.ok() || key->empty()) return "";
    for (char c : *key) {
      if (c <= ' ' || c > '~') return "";
    }
    return *key;
  }
  return "";
}

void AdoptWebSocketBearer(Request& req) {
  if (!req.Header("authorization").empty() || req.Header("upgrade").empty()) return;
  std::string key = BearerFromSubprotocols(req.Header("sec-websocket-protocol"));
  if (!key.empty()) req.headers["authorization"] = "Bearer " + key;
}

std::string EncodeWsFrame(WsOpcode opcode, std::string_view payload) {
  std::string f;
  f.reserve(payload.size() + 10);
  f += static_cast<char>(0x80 | static_cast<uint8_t>(opcode));
  const uint64_t n = payload.size();
  if (n < 126) {
    f += static_cast<char>(n);
  } else if (n <= 0xffff) {
    f += static_cast<char>(126);
    f += static_cast<char>(n >> 8);
    f += static_cast<char>(n & 0xff);
  } else {
    f += static_cast<char>(127);
    for (int shift = 56; shift >= 0; shift -= 8) f += static_cast<char>((n >> shift) & 0xff);
  }
  f.append(payload);
  return f;
}

Status WsReader::Feed(std::string_view bytes, std::vector<WsMessage>* out) {
  // What stays buffered is bounded: TakeFrame refuses a frame announcing more than the limit
  // as soon as its header is here, before waiting for its payload.
  buf_.append(bytes);
  for (;;) {
    ASSIGN_OR_RETURN(bool took, TakeFrame(out));
    if (!took) return Status::Ok();
  }
}

Result<bool> WsReader::TakeFrame(std::vector<WsMessage>* out) {
  if (buf_.size() < 2) return false;
  const auto b0 = static_cast<uint8_t>(buf_[0]);
  const auto b1 = static_cast<uint8_t>(buf_[1]);
  const bool fin = (b0 & 0x80) != 0;
  if ((b0 & 0x70) != 0) return InvalidArgument("a WebSocket frame with reserved bits set");
  if (!KnownOpcode(b0 & 0x0f))
    return InvalidArgument("a WebSocket frame with unknown opcode " + std::to_string(b0 & 0x0f));
  const auto op = static_cast<WsOpcode>(b0 & 0x0f);
  if ((b1 & 0x80) == 0) return InvalidArgument("an unmasked WebSocket frame from the client");
  uint64_t len = b1 & 0x7f;
  size_t header = 2;
  if (len == 126) {
    if (buf_.size() < 4) return false;
    len = (uint64_t{static_cast<uint8_t>(buf_[2])} << 8) | static_cast<uint8_t>(buf_[3]);
    header = 4;
  } else if (len == 127) {
    if (buf_.size() < 10) return false;
    len = 0;
    for (int i = 2; i < 10; ++i) len = (len << 8) | static_cast<uint8_t>(buf_[i]);
    header = 10;
  }
  if (IsControl(op) && (!fin || len > 125)) return InvalidArgument("a fragmented or long WebSocket control frame");
  const size_t so_far = IsControl(op) ? 0 : partial_.size();
  if (len > max_message_bytes_ || so_far + len > max_message_bytes_) {
    return PayloadTooLarge("a WebSocket message over " + std::to_string(max_message_bytes_) + " bytes");
  }
  if (buf_.size() < header + 4 + len) return false;
  const char* mask = buf_.data() + header;
  std::string payload = buf_.substr(header + 4, len);
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<char>(payload[i] ^ mask[i % 4]);
  buf_.erase(0, header + 4 + len);

  if (IsControl(op)) {
    out->push_back({op, std::move(payload)});
    return true;
  }
  if (op == WsOpcode::kContinuation) {
    if (!in_message_) return InvalidArgument("a WebSocket continuation frame with no message to continue");
  } else {
    if (in_message_) return InvalidArgument("a new WebSocket message before the last one ended");
    in_message_ = true;
    partial_opcode_ = op;
    partial_.clear();
  }
  partial_ += payload;
  if (fin) {
    in_message_ = false;
    out->push_back({partial_opcode_, std::move(partial_)});
    partial_.clear();
  }
  return true;
}

Result<WsMessage> WsConnection::Read(int timeout_ms) {
  for (;;) {
    while (next_queued_ < queued_.size()) {
      WsMessage m = std::move(queued_[next_queued_++]);
      if (next_queued_ == queued_.size()) {
        queued_.clear();
        next_queued_ = 0;
      }
      switch (m.opcode) {
        case WsOpcode::kPing:
          RETURN_IF_ERROR(Send(WsOpcode::kPong, m.payload));
          continue;
        case WsOpcode::kPong:
          continue;
        case WsOpcode::kClose:
          Close(1000, "");
          return Unavailable("the client closed the WebSocket");
        default:
          return m;
      }
    }
    if (!pending_.empty()) {
      std::string bytes = std::move(pending_);
      pending_.clear();
      Status st = reader_.Feed(bytes, &queued_);
      if (!st.ok()) {
        Close(st.code() == StatusCode::kPayloadTooLarge ? kTooBig : kProtocolError, "");
        return st;
      }
      continue;
    }
    pollfd p{fd_, POLLIN, 0};
    int r = ::poll(&p, 1, timeout_ms);
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) return DeadlineExceeded("no WebSocket message within " + std::to_string(timeout_ms) + " ms");
    char buf[64 * 1024];
    ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) return Unavailable("the WebSocket client went away");
    pending_.assign(buf, static_cast<size_t>(n));
  }
}

Status WsConnection::Send(WsOpcode opcode, std::string_view payload) {
  const std::string frame = EncodeWsFrame(opcode, payload);
  MutexLock lock(&send_mu_);
  if (closed_) return Unavailable("the WebSocket is closed");
  size_t off = 0;
  while (off < frame.size()) {
    ssize_t n = ::send(fd_, frame.data() + off, frame.size() - off, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      off += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) {
      pollfd p{fd_, POLLOUT, 0};
      int r = ::poll(&p, 1, kWriteStallMs);
      if (r > 0 || (r < 0 && errno == EINTR)) continue;
      closed_ = true;
      return Unavailable("the WebSocket client stopped reading");
    }
    closed_ = true;
    return Unavailable("the WebSocket client went away");
  }
  return Status::Ok();
}

void WsConnection::Close(uint16_t code, std::string_view reason) {
  std::string payload;
  payload += static_cast<char>(code >> 8);
  payload += static_cast<char>(code & 0xff);
  payload.append(reason.substr(0, 120));
  (void)Send(WsOpcode::kClose, payload);
  MutexLock lock(&send_mu_);
  closed_ = true;
}

}  // namespace space::api
