// HMAC-SHA256 as lowercase hex: the node's keyed tokens (E2B access tokens, fleet template
// records). Its own library (space_hmac) so the static guest, which links space_common, does
// not link OpenSSL.
#pragma once

#include <string>
#include <string_view>

namespace space {

std::string HmacSha256Hex(std::string_view key, std::string_view message);
// Plain SHA-256 as lowercase hex: how secrets shown once (preview port tokens) are stored.
std::string Sha256Hex(std::string_view data);

}  // namespace space
