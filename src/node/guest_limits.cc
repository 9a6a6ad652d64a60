#include "node/guest_limits.h"

#include <memory>
#include <optional>

#include <nlohmann/json.hpp>

#include "node/guest_error.h"
#include "node/guest_reply.h"

namespace space::node {

Result<GuestLimitsSeen> GuestQueryLimits(LiveSandbox* live, int64_t timeout_ms) {
  if (!live->guest || !live->guest->alive()) return Unavailable("sandbox " + live->id + ": no guest channel");
  auto reply = std::make_shared<GuestReply>();
  const uint32_t stream = live->guest->OpenStream(reply);
  Status st = live->guest->Send(guest::FrameType::kLimitsQuery, stream, "");
  Result<guest::Frame> frame = st.ok() ? reply->Wait(timeout_ms, "a limits query") : Result<guest::Frame>(st);
  live->guest->CloseStream(stream);
  if (!frame.ok()) return frame.status();
  if (frame->type == guest::FrameType::kError) {
    return GuestErrorStatus(frame->payload, "the guest could not report its limits", {StatusCode::kPermissionDenied});
  }
  auto j = nlohmann::json::parse(frame->payload, nullptr, false);
  auto count = [&](const char* key) -> std::optional<uint64_t> {
    if (!j.is_object() || !j.contains(key) || !j[key].is_number_unsigned()) return std::nullopt;
    return j[key].get<uint64_t>();
  };
  auto oom = count("oom_kills"), total = count("disk_total"), avail = count("disk_avail");
  if (frame->type != guest::FrameType::kLimits || !oom || !total || !avail || *avail > *total) {
    return Internal("sandbox " + live->id + ": the guest's limits answer is malformed");
  }
  return GuestLimitsSeen{*oom, *total, *avail};
}

}  // namespace space::node
