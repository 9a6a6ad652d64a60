// Exception-free JSON helpers for spaced's request parsing and replies.
//
// nlohmann::json throws on malformed input and on dumping invalid UTF-8; these helpers are
// the boundary where that is caught, so callers only ever see Status values. Stateless and
// thread-safe.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "common/result.h"

namespace space::guest {

// Nesting deeper than this is refused before parsing: requests are flat, and a deeply
// nested document would otherwise cost recursion depth in the DOM.
inline constexpr int kMaxJsonDepth = 32;

// Parses `text` as a JSON object. Anything else (syntax error, non-object, too deep) is
// kInvalidArgument naming `what`.
Result<nlohmann::json> ParseJsonObject(std::string_view text, std::string_view what);

// Serializes `j`; invalid UTF-8 in strings (file names, error text) is replaced with
// U+FFFD instead of throwing.
std::string DumpJson(const nlohmann::json& j);

// {"code": "<api word>", "message": "..."} for a kError frame.
std::string ErrorJson(const Status& status);

}  // namespace space::guest
