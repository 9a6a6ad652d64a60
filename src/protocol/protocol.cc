#include "protocol/protocol.h"

#include <sys/uio.h>

#include <cerrno>
#include <cstring>

#include "common/syscall.h"

namespace space::guest {
namespace {
void PutU16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v);
  p[1] = static_cast<uint8_t>(v >> 8);
}
void PutU32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint32_t GetU32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 | static_cast<uint32_t>(p[2]) << 16 |
         static_cast<uint32_t>(p[3]) << 24;
}
}  // namespace

void EncodeHeader(FrameType type, uint32_t stream, uint32_t payload_len, uint8_t out[kHeaderSize]) {
  out[0] = kVersion;
  out[1] = static_cast<uint8_t>(type);
  PutU16(out + 2, 0);
  PutU32(out + 4, stream);
  PutU32(out + 8, payload_len);
}

std::string EncodeFrame(FrameType type, uint32_t stream, std::string_view payload) {
  std::string out(kHeaderSize, '\0');
  EncodeHeader(type, stream, static_cast<uint32_t>(payload.size()), reinterpret_cast<uint8_t*>(out.data()));
  out.append(payload);
  return out;
}

std::string EncodeReseed(std::string_view entropy, int64_t realtime_ns) {
  std::string payload(entropy);
  if (realtime_ns > 0) {
    for (size_t i = 0; i < kReseedClockBytes; ++i) {
      payload.push_back(static_cast<char>((static_cast<uint64_t>(realtime_ns) >> (8 * i)) & 0xff));
    }
  }
  return EncodeFrame(FrameType::kReseed, 0, payload);
}

int64_t ReseedRealtimeNs(const Frame& frame) {
  if (frame.payload.size() != kReseedBytes + kReseedClockBytes) return 0;
  uint64_t v = 0;
  for (size_t i = 0; i < kReseedClockBytes; ++i) {
    v |= static_cast<uint64_t>(static_cast<uint8_t>(frame.payload[kReseedBytes + i])) << (8 * i);
  }
  return static_cast<int64_t>(v);
}

std::string EncodeGrowDisk(uint64_t device_bytes) {
  std::string payload(8, '\0');
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<char>((device_bytes >> (8 * i)) & 0xff);
  return EncodeFrame(FrameType::kGrowDisk, 0, payload);
}

Result<uint64_t> ParseGrowDisk(const Frame& frame) {
  if (frame.type != FrameType::kGrowDisk || frame.stream != 0 || frame.payload.size() != 8) {
    return InvalidArgument("grow disk frame: must be kGrowDisk on stream 0 with 8 bytes");
  }
  uint64_t v = 0;
  for (size_t i = 0; i < 8; ++i) v |= static_cast<uint64_t>(static_cast<uint8_t>(frame.payload[i])) << (8 * i);
  return v;
}

std::string EncodeTcpAck(uint32_t bytes) {
  std::string payload(4, '\0');
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<char>((bytes >> (8 * i)) & 0xff);
  return payload;
}

Result<uint32_t> ParseTcpAck(std::string_view payload) {
  if (payload.size() != 4) return InvalidArgument("tcp ack: " + std::to_string(payload.size()) + " bytes, want 4");
  uint32_t v = 0;
  for (size_t i = 0; i < 4; ++i) v |= static_cast<uint32_t>(static_cast<uint8_t>(payload[i])) << (8 * i);
  return v;
}

Status ValidateReseed(const Frame& frame) {
  if (frame.type != FrameType::kReseed || frame.stream != 0) {
    return InvalidArgument("reseed frame: must be kReseed on stream 0");
  }
  if (frame.payload.size() != kReseedBytes && frame.payload.size() != kReseedBytes + kReseedClockBytes) {
    return InvalidArgument("reseed frame: " + std::to_string(frame.payload.size()) + " bytes, want " +
                           std::to_string(kReseedBytes) + " or " + std::to_string(kReseedBytes + kReseedClockBytes));
  }
  return Status::Ok();
}

Result<FrameHeader> DecodeHeader(const uint8_t in[kHeaderSize]) {
  FrameHeader h;
  h.version = in[0];
  if (h.version != kVersion) {
    return InvalidArgument("channel frame: unsupported protocol version " + std::to_string(h.version));
  }
  h.type = static_cast<FrameType>(in[1]);
  h.flags = static_cast<uint16_t>(in[2] | in[3] << 8);
  h.stream = GetU32(in + 4);
  h.length = GetU32(in + 8);
  if (h.length > kMaxPayload) {
    return PayloadTooLarge("channel frame: payload of " + std::to_string(h.length) + " bytes exceeds " +
                           std::to_string(kMaxPayload));
  }
  return h;
}

Status FrameParser::Feed(std::string_view bytes) {
  if (broken_) return InvalidArgument("channel frame parser: stream already broken");
  // Compact before growing so a long-lived connection does not accumulate consumed bytes.
  if (pos_ > 0 && pos_ * 2 >= buf_.size()) {
    buf_.erase(0, pos_);
    pos_ = 0;
  }
  buf_.append(bytes);
  if (buffered() >= kHeaderSize) {
    auto h = DecodeHeader(reinterpret_cast<const uint8_t*>(buf_.data() + pos_));
    if (!h.ok()) {
      broken_ = true;
      return h.status();
    }
  }
  return Status::Ok();
}

std::optional<Frame> FrameParser::Next() {
  if (broken_ || buffered() < kHeaderSize) return std::nullopt;
  auto h = DecodeHeader(reinterpret_cast<const uint8_t*>(buf_.data() + pos_));
  if (!h.ok()) {
    broken_ = true;
    return std::nullopt;
  }
  if (buffered() < kHeaderSize + h->length) return std::nullopt;
  Frame f;
  f.type = h->type;
  f.stream = h->stream;
  f.payload.assign(buf_, pos_ + kHeaderSize, h->length);
  pos_ += kHeaderSize + h->length;
  // Validate the following header early so a bad stream is reported on the next Feed.
  if (buffered() >= kHeaderSize &&
      !DecodeHeader(reinterpret_cast<const uint8_t*>(buf_.data() + pos_)).ok()) {
    broken_ = true;
  }
  return f;
}

Status WriteFrame(int fd, FrameType type, uint32_t stream, std::string_view payload) {
  if (payload.size() > kMaxPayload) return PayloadTooLarge("channel frame: payload too large to send");
  uint8_t hdr[kHeaderSize];
  EncodeHeader(type, stream, static_cast<uint32_t>(payload.size()), hdr);
  iovec iov[2] = {{hdr, kHeaderSize}, {const_cast<char*>(payload.data()), payload.size()}};
  size_t total = kHeaderSize + payload.size();
  size_t done = 0;
  int iovcnt = payload.empty() ? 1 : 2;
  iovec* cur = iov;
  while (done < total) {
    ssize_t n = RetryEintr([&] { return ::writev(fd, cur, iovcnt); });
    if (n < 0) return ErrnoStatus("writev", "channel", errno);
    done += static_cast<size_t>(n);
    size_t adv = static_cast<size_t>(n);
    while (iovcnt > 0 && adv >= cur->iov_len) {
      adv -= cur->iov_len;
      ++cur;
      --iovcnt;
    }
    if (iovcnt > 0) {
      cur->iov_base = static_cast<char*>(cur->iov_base) + adv;
      cur->iov_len -= adv;
    }
  }
  return Status::Ok();
}

Result<Frame> ReadFrame(int fd) {
  uint8_t hdr[kHeaderSize];
  RETURN_IF_ERROR(ReadExact(fd, hdr, kHeaderSize));
  ASSIGN_OR_RETURN(FrameHeader h, DecodeHeader(hdr));
  Frame f;
  f.type = h.type;
  f.stream = h.stream;
  f.payload.resize(h.length);
  if (h.length > 0) RETURN_IF_ERROR(ReadExact(fd, f.payload.data(), h.length));
  return f;
}

}  // namespace space::guest
