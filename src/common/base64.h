// Standard base64 (RFC 4648, '=' padding), strict on decode: a given byte string has exactly
// one accepted encoding.
#pragma once

#include <string>
#include <string_view>

#include "common/result.h"

namespace space {

std::string Base64Encode(std::string_view data);
// Fails (invalid_argument) on a length that is not a multiple of 4, a character outside the
// alphabet, misplaced padding, or non-zero bits under the padding.
Result<std::string> Base64Decode(std::string_view text);

}  // namespace space
