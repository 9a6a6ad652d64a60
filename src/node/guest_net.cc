#include "node/guest_net.h"

#include <memory>

#include <nlohmann/json.hpp>

#include "network/netlink.h"
#include "node/guest_error.h"
#include "node/guest_reply.h"

namespace space::node {
namespace {

// The guest's configuration takes a few ioctls; under TCG emulation, a little longer.
constexpr int64_t kAnswerMs = 30000;

}  // namespace

Status GuestConfigureNetwork(LiveSandbox* live, in_addr address, in_addr gateway, const std::string& mac) {
  auto reply = std::make_shared<GuestReply>();
  const uint32_t stream = live->guest->OpenStream(reply);
  const nlohmann::json request = {
      {"address", network::FormatIpv4(address)}, {"gateway", network::FormatIpv4(gateway)}, {"mac", mac}};
  Status st = live->guest->Send(guest::FrameType::kNetConfig, stream, request.dump());
  if (st.ok()) {
    Result<guest::Frame> frame = reply->Wait(kAnswerMs, "a net config");
    if (!frame.ok()) {
      st = frame.status();
    } else if (frame->type == guest::FrameType::kError) {
      st = GuestErrorStatus(frame->payload, "the guest could not configure its network",
                            {StatusCode::kInvalidArgument, StatusCode::kPermissionDenied});
    } else if (frame->type != guest::FrameType::kNetConfigured) {
      st = Internal("the guest answered a net config with frame type " + std::to_string(static_cast<int>(frame->type)));
    }
  }
  live->guest->CloseStream(stream);
  return st.Annotate("sandbox " + live->id + ": guest network");
}

}  // namespace space::node
