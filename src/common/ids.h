// The checks of the platform's ids, one per alphabet. NewId (common/random.h) issues them;
// every layer that takes one checks it here. Pure functions, thread-safe.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "common/status.h"

namespace space {

// The longest sandbox id any layer accepts.
inline constexpr size_t kMaxSandboxIdLen = 64;

// True for a character of the sandbox id alphabet: [A-Za-z0-9_-].
bool IsSandboxIdChar(char c);

// A sandbox id as the runtimes, the pool, the broker and credential scopes take it: 1..64
// characters of [A-Za-z0-9_-]. It becomes a path component (never "." or ".."), a cgroup
// leaf and a broker argument, so nothing else is allowed. kInvalidArgument otherwise.
Status ValidateSandboxId(std::string_view id);

// An id in the public form NewId issues, as a request names it: `prefix`, "_", then 1..64
// characters of [A-Za-z0-9] ("sbx_...", "snap_...", "proc_...", "op_..."). The API's check
// before a lookup, so a malformed id is a plain "not found".
bool IsPublicId(std::string_view s, std::string_view prefix);

// The DNS label that names sandbox `id` (or an E2B host's lowercased id) in preview hosts:
// lower case, '_' as '-' (browsers lowercase host names, and '_' is not valid in DNS).
// "sbx_AbC" -> "sbx-abc".
std::string SandboxHostLabel(std::string_view id);

}  // namespace space
