// Byte encodings at the API edge: base64 and UTF-8 validation for process output and stdin.
#pragma once

#include <string>
#include <string_view>

#include "common/result.h"

namespace space::api {

std::string Base64Encode(std::string_view in);
// Strict decoding (standard alphabet, '=' padding optional); fails on any other byte.
Result<std::string> Base64Decode(std::string_view in);

bool IsValidUtf8(std::string_view s);
// Length of the longest prefix of `s` that does not end inside a multi-byte UTF-8 sequence,
// so a stream split into chunks can carry an incomplete character over to the next chunk.
size_t Utf8CompletePrefix(std::string_view s);

}  // namespace space::api
