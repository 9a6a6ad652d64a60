// UTF-8 validation at the API edge, for process output (base64 is in common/base64.h).
#pragma once

#include <string>
#include <string_view>

#include "common/base64.h"
#include "common/result.h"

namespace space::api {


bool IsValidUtf8(std::string_view s);
// Length of the longest prefix of `s` that does not end inside a multi-byte UTF-8 sequence,
// so a stream split into chunks can carry an incomplete character over to the next chunk.
size_t Utf8CompletePrefix(std::string_view s);

}  // namespace space::api
