#include "node/guest_net.h"

#include <condition_variable>
#include <memory>
#include <mutex>

#include <nlohmann/json.hpp>

#include "network/netlink.h"
#include "node/guest_error.h"

namespace space::node {
namespace {

// The guest's configuration takes a few ioctls; under TCG emulation, a little longer.
constexpr int64_t kAnswerMs = 30000;

// Waits for the one answer of a kNetConfig stream.
class NetConfigReply : public StreamSink {
 public:
  Status Wait(int64_t timeout_ms) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return done_; })) {
      return DeadlineExceeded("the guest did not configure its network in time");
    }
    return result_;
  }
  void OnFrame(guest::Frame frame) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (done_) return;
    if (frame.type == guest::FrameType::kNetConfigured) {
      result_ = Status::Ok();
    } else if (frame.type == guest::FrameType::kError) {
      result_ = GuestErrorStatus(frame.payload, "the guest could not configure its network",
                                 {StatusCode::kInvalidArgument, StatusCode::kPermissionDenied});
    } else {
      result_ =
          Internal("the guest answered a net config with frame type " + std::to_string(static_cast<int>(frame.type)));
    }
    done_ = true;
    cv_.notify_all();
  }
  void OnChannelClosed(const Status& why) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (done_) return;
    result_ = why.ok() ? Unavailable("the guest channel closed") : why;
    done_ = true;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;  // GUARDED_BY(mu_)
  Status result_;      // GUARDED_BY(mu_)
};

}  // namespace

Status GuestConfigureNetwork(LiveSandbox* live, in_addr address, in_addr gateway, const std::string& mac) {
  auto reply = std::make_shared<NetConfigReply>();
  const uint32_t stream = live->guest->OpenStream(reply);
  const nlohmann::json request = {
      {"address", network::FormatIpv4(address)}, {"gateway", network::FormatIpv4(gateway)}, {"mac", mac}};
  Status st = live->guest->Send(guest::FrameType::kNetConfig, stream, request.dump());
  if (st.ok()) st = reply->Wait(kAnswerMs);
  live->guest->CloseStream(stream);
  return st.Annotate("sandbox " + live->id + ": guest network");
}

}  // namespace space::node
