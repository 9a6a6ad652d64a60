#include "node/guest_client.h"

#include <poll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "common/log.h"
#include "common/random.h"
#include "common/syscall.h"

namespace space::node {

GuestClient::GuestClient(UniqueFd channel, std::string sandbox_id)
    : sandbox_id_(std::move(sandbox_id)), channel_(std::move(channel)) {
  // Large sends towards the guest (uploads, preview requests) in few pieces; capped by
  // net.core.wmem_max, best effort. A vm's channel is QEMU's socket: the same applies.
  int bytes = 4 << 20;
  (void)::setsockopt(channel_.get(), SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes);
}

GuestClient::~GuestClient() { Shutdown(); }

Status GuestClient::Start(int timeout_ms) {
  // A guest that never reads must not block senders forever.
  timeval tv{10, 0};
  if (::setsockopt(channel_.get(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) != 0) {
    return ErrnoStatus("setsockopt SO_SNDTIMEO", sandbox_id_, errno);
  }
  pollfd pfd{channel_.get(), POLLIN, 0};
  int64_t deadline = MonoNowNs() + int64_t{timeout_ms} * 1000000;
  for (;;) {
    int left = static_cast<int>((deadline - MonoNowNs()) / 1000000);
    if (left <= 0) return Unavailable("sandbox " + sandbox_id_ + ": guest did not say hello in time");
    int r = ::poll(&pfd, 1, left);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return ErrnoStatus("poll", "guest channel", errno);
    if (r > 0) break;
  }
  ASSIGN_OR_RETURN(guest::Frame hello, guest::ReadFrame(channel_.get()));
  if (hello.type != guest::FrameType::kHello) {
    return Unavailable("sandbox " + sandbox_id_ + ": guest spoke before saying hello");
  }
  auto j = nlohmann::json::parse(hello.payload, nullptr, false);
  if (!j.is_object() || !j.contains("version") || j["version"] != guest::kVersion) {
    return Unavailable("sandbox " + sandbox_id_ + ": guest protocol version mismatch");
  }
  alive_ = true;
  reader_ = std::thread([this] { ReadLoop(); });
  return Status::Ok();
}

Status GuestClient::Resume(int timeout_ms, uint64_t disk_bytes) {
  timeval tv{10, 0};
  if (::setsockopt(channel_.get(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) != 0) {
    return ErrnoStatus("setsockopt SO_SNDTIMEO", sandbox_id_, errno);
  }
  // Every guest restored from one checkpoint holds the same kernel CRNG state: hand it fresh
  // host randomness first. The guest handles frames in order, so the pong below means the
  // reseed happened before any exec we send afterwards.
  std::string entropy(guest::kReseedBytes, '\0');
  for (size_t got = 0; got < entropy.size();) {
    ssize_t n = ::getrandom(entropy.data() + got, entropy.size() - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus("getrandom", "reseed", errno);
    got += static_cast<size_t>(n);
  }
  timespec now{};
  ::clock_gettime(CLOCK_REALTIME, &now);
  const int64_t realtime_ns = static_cast<int64_t>(now.tv_sec) * 1000000000 + now.tv_nsec;
  RETURN_IF_ERROR(WriteAll(channel_.get(), guest::EncodeReseed(entropy, realtime_ns)));
  if (disk_bytes > 0) RETURN_IF_ERROR(WriteAll(channel_.get(), guest::EncodeGrowDisk(disk_bytes)));
  const std::string nonce = "resume-" + RandomHex(8);
  RETURN_IF_ERROR(guest::WriteFrame(channel_.get(), guest::FrameType::kPing, 0, nonce));
  pollfd pfd{channel_.get(), POLLIN, 0};
  const int64_t deadline = MonoNowNs() + int64_t{timeout_ms} * 1000000;
  for (;;) {
    int left = static_cast<int>((deadline - MonoNowNs()) / 1000000);
    if (left <= 0) return Unavailable("sandbox " + sandbox_id_ + ": restored guest did not answer in time");
    int r = ::poll(&pfd, 1, left);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return ErrnoStatus("poll", "guest channel", errno);
    if (r == 0) continue;
    ASSIGN_OR_RETURN(guest::Frame f, guest::ReadFrame(channel_.get()));
    if (f.type == guest::FrameType::kPong && f.stream == 0 && f.payload == nonce) break;
    // The guest could not reseed or grow its disk (it says so on stream 0, before the pong):
    // no restore with a shared RNG state, nor with less disk than the sandbox was given.
    if (f.type == guest::FrameType::kError && f.stream == 0) {
      return Unavailable("sandbox " + sandbox_id_ + ": restored guest could not resynchronize: " + f.payload);
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    next_stream_ = (1u << 30) + static_cast<uint32_t>(std::stoul(RandomHex(7), nullptr, 16));
  }
  alive_ = true;
  reader_ = std::thread([this] { ReadLoop(); });
  return Status::Ok();
}

uint32_t GuestClient::OpenStream(std::shared_ptr<StreamSink> sink) {
  std::lock_guard<std::mutex> lock(mu_);
  uint32_t id = next_stream_++;
  if (closed_) {
    sink->OnChannelClosed(Unavailable("sandbox " + sandbox_id_ + ": guest channel is closed"));
    return id;
  }
  streams_[id] = std::move(sink);
  return id;
}

void GuestClient::CloseStream(uint32_t stream) {
  std::lock_guard<std::mutex> lock(mu_);
  streams_.erase(stream);
}

Status GuestClient::Send(guest::FrameType type, uint32_t stream, std::string_view payload) {
  if (!alive_) return Unavailable("sandbox " + sandbox_id_ + ": guest channel is closed");
  std::lock_guard<std::mutex> lock(write_mu_);
  Status st = guest::WriteFrame(channel_.get(), type, stream, payload);
  if (!st.ok()) return Unavailable("sandbox " + sandbox_id_ + ": guest channel: " + st.message());
  return st;
}

void GuestClient::ReadLoop() {
  Status why;
  for (;;) {
    auto frame = guest::ReadFrame(channel_.get());
    if (!frame.ok()) {
      why = Unavailable("sandbox " + sandbox_id_ + ": guest channel closed: " + frame.status().message());
      break;
    }
    std::shared_ptr<StreamSink> sink;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = streams_.find(frame->stream);
      if (it != streams_.end()) sink = it->second;
    }
    if (frame->type == guest::FrameType::kPong || frame->type == guest::FrameType::kHello) continue;
    if (!sink) continue;  // unknown or finished stream: a late or hostile frame
    sink->OnFrame(std::move(frame).value());
  }
  alive_ = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!shutting_down_) lost_ = why;
  }
  FailAll(why);
}

std::optional<Status> GuestClient::lost() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lost_;
}

void GuestClient::FailAll(const Status& why) {
  std::map<uint32_t, std::shared_ptr<StreamSink>> streams;
  {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
    streams.swap(streams_);
  }
  for (auto& [id, sink] : streams) sink->OnChannelClosed(why);
}

void GuestClient::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    shutting_down_ = true;
  }
  if (channel_.valid()) ::shutdown(channel_.get(), SHUT_RDWR);
  if (reader_.joinable()) reader_.join();
  alive_ = false;
  FailAll(Unavailable("sandbox " + sandbox_id_ + " is shutting down"));
}

}  // namespace space::node
