// Minimal structured logging to stderr: one line per event, "ts level component: message".
// Thread-safe. Never given secrets.
#pragma once

#include <string_view>

namespace space {

enum class LogLevel { kDebug, kInfo, kWarn, kError };

void SetLogLevel(LogLevel level);
void Log(LogLevel level, std::string_view component, std::string_view message);

inline void LogInfo(std::string_view c, std::string_view m) { Log(LogLevel::kInfo, c, m); }
inline void LogWarn(std::string_view c, std::string_view m) { Log(LogLevel::kWarn, c, m); }
inline void LogError(std::string_view c, std::string_view m) { Log(LogLevel::kError, c, m); }
inline void LogDebug(std::string_view c, std::string_view m) { Log(LogLevel::kDebug, c, m); }

}  // namespace space
