#include "common/log.h"

#include <atomic>
#include <cstdio>
#include <mutex>
#include <string>

#include "common/clock.h"

namespace space {
namespace {
std::atomic<int> g_level{static_cast<int>(LogLevel::kInfo)};
std::mutex g_mu;
const char* LevelName(LogLevel l) {
  switch (l) {
    case LogLevel::kDebug: return "DEBUG";
    case LogLevel::kInfo: return "INFO";
    case LogLevel::kWarn: return "WARN";
    case LogLevel::kError: return "ERROR";
  }
  return "?";
}
}  // namespace

void SetLogLevel(LogLevel level) { g_level = static_cast<int>(level); }

void Log(LogLevel level, std::string_view component, std::string_view message) {
  if (static_cast<int>(level) < g_level.load()) return;
  std::string line = FormatRfc3339(WallNowMs());
  line += ' ';
  line += LevelName(level);
  line += ' ';
  line += component;
  line += ": ";
  line += message;
  line += '\n';
  std::lock_guard<std::mutex> lock(g_mu);
  std::fwrite(line.data(), 1, line.size(), stderr);
}

}  // namespace space
