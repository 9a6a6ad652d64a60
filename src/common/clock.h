// Time helpers: wall-clock milliseconds for records, monotonic for durations.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/result.h"

namespace space {

// Milliseconds since the Unix epoch.
int64_t WallNowMs();
// Monotonic nanoseconds (CLOCK_MONOTONIC), for measuring durations.
int64_t MonoNowNs();
// "2026-11-30T01:02:03.456Z".
std::string FormatRfc3339(int64_t epoch_ms);
// Parses "YYYY-MM-DDTHH:MM:SS[.fraction]Z" into Unix epoch milliseconds (fraction truncated
// to ms). Refuses offsets other than Z, out-of-range fields and leap seconds.
Result<int64_t> ParseRfc3339Utc(std::string_view text);

}  // namespace space
