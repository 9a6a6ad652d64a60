// The guest's kError payload ({"code", "message"}) as a Status. The guest is hostile: its
// message is cut to 1 KiB, and only the codes the caller's operation may legitimately end
// with are honoured; anything else becomes kInternal with `fallback` as the message when the
// guest gave none.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>

#include "common/status.h"

namespace space::node {

Status GuestErrorStatus(const std::string& payload, std::string_view fallback, std::initializer_list<StatusCode> allowed);

}  // namespace space::node
