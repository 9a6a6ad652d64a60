#include "node/tcp_tunnel.h"

#include <algorithm>
#include <chrono>

#include "protocol/json_util.h"

namespace space::node {
namespace {

// Acks go back in steps this large (or when everything queued was read).
constexpr uint32_t kAckEvery = 256 * 1024;

Status GuestError(const std::string& payload) {
  Result<nlohmann::json> j = guest::ParseJsonObject(payload, "tcp error");
  std::string message = "the sandbox ended the connection";
  if (j.ok() && j->contains("message") && (*j)["message"].is_string()) message = (*j)["message"].get<std::string>();
  return Unavailable(message.substr(0, 512));
}

}  // namespace

Status TcpTunnel::WaitOpened(int64_t timeout_ms) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return opened_ || !ended_.ok(); })) {
    return DeadlineExceeded("the sandbox did not connect to the port within " + std::to_string(timeout_ms) + " ms");
  }
  return opened_ ? Status::Ok() : ended_;
}

Status TcpTunnel::Write(std::string_view data, int64_t stall_ms) {
  while (!data.empty()) {
    size_t n;
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (!cv_.wait_for(lock, std::chrono::milliseconds(stall_ms),
                        [&] { return !ended_.ok() || in_flight_ < guest::kTcpWindow; })) {
        return DeadlineExceeded("the sandbox's server stopped reading");
      }
      if (!ended_.ok()) return ended_;
      n = std::min<size_t>({data.size(), guest::kTcpWindow - in_flight_, guest::kTcpChunk});
      in_flight_ += static_cast<uint32_t>(n);
    }
    RETURN_IF_ERROR(send_(guest::FrameType::kTcpData, data.substr(0, n)));
    data.remove_prefix(n);
  }
  return Status::Ok();
}

Status TcpTunnel::ShutdownWrite() { return send_(guest::FrameType::kTcpData, {}); }

Result<size_t> TcpTunnel::Read(char* buf, size_t max, int64_t timeout_ms) {
  uint32_t ack = 0;
  size_t n = 0;
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                      [&] { return !in_.empty() || eof_ || !ended_.ok(); })) {
      return DeadlineExceeded("no bytes from the sandbox's server");
    }
    while (!in_.empty() && n < max) {
      const std::string& front = in_.front();
      size_t take = std::min(max - n, front.size() - in_offset_);
      front.copy(buf + n, take, in_offset_);
      n += take;
      in_offset_ += take;
      if (in_offset_ == front.size()) {
        in_.pop_front();
        in_offset_ = 0;
      }
    }
    if (n == 0) {
      if (eof_) return size_t{0};
      return ended_;
    }
    in_bytes_ -= n;
    unacked_read_ += static_cast<uint32_t>(n);
    if (unacked_read_ >= kAckEvery || in_.empty()) {
      ack = unacked_read_;
      unacked_read_ = 0;
    }
  }
  if (ack > 0) (void)send_(guest::FrameType::kTcpAck, guest::EncodeTcpAck(ack));
  return n;
}

void TcpTunnel::Close() {
  std::call_once(closed_, [&] {
    bool tell = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      tell = ended_.ok();
      EndLocked(Unavailable("the preview connection was closed"));
    }
    cv_.notify_all();
    // Outside the lock: a send may wait on the channel, and the reader thread needs mu_.
    if (tell) (void)send_(guest::FrameType::kTcpClose, {});
    if (closer_) closer_();
  });
}

void TcpTunnel::EndLocked(Status why) {
  if (ended_.ok()) ended_ = std::move(why);
}

void TcpTunnel::OnFrame(guest::Frame frame) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!ended_.ok()) return;
    switch (frame.type) {
      case guest::FrameType::kTcpOpened:
        opened_ = true;
        break;
      case guest::FrameType::kTcpData:
        if (!opened_ || eof_) {
          EndLocked(Unavailable("the sandbox broke the tcp protocol (data out of order)"));
        } else if (frame.payload.empty()) {
          eof_ = true;
        } else if (in_bytes_ + unacked_read_ + frame.payload.size() > guest::kTcpWindow) {
          EndLocked(Unavailable("the sandbox overran its window"));
        } else {
          in_bytes_ += frame.payload.size();
          in_.push_back(std::move(frame.payload));
        }
        break;
      case guest::FrameType::kTcpAck: {
        Result<uint32_t> n = guest::ParseTcpAck(frame.payload);
        if (!n.ok() || *n > in_flight_) {
          EndLocked(Unavailable("the sandbox broke the tcp protocol (bad ack)"));
        } else {
          in_flight_ -= *n;
        }
        break;
      }
      case guest::FrameType::kTcpClose:
        // Whatever arrived before it is still read; then the stream is over.
        if (!eof_) eof_ = true;
        EndLocked(Unavailable("the sandbox's server closed the connection"));
        break;
      case guest::FrameType::kError:
        EndLocked(GuestError(frame.payload));
        break;
      default:
        break;  // anything else on this stream is ignored
    }
  }
  cv_.notify_all();
}

void TcpTunnel::OnChannelClosed(const Status& why) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    EndLocked(Unavailable("the sandbox went away: " + why.message()));
  }
  cv_.notify_all();
}

}  // namespace space::node
