// Time helpers: wall-clock milliseconds for records, monotonic for durations.
#pragma once

#include <cstdint>
#include <string>

namespace space {

// Milliseconds since the Unix epoch.
int64_t WallNowMs();
// Monotonic nanoseconds (CLOCK_MONOTONIC), for measuring durations.
int64_t MonoNowNs();
// "2026-11-30T01:02:03.456Z".
std::string FormatRfc3339(int64_t epoch_ms);

}  // namespace space
