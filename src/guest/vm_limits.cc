#include "guest/vm_limits.h"

#include <sys/statfs.h>

#include <cerrno>
#include <cstdlib>

#include <nlohmann/json.hpp>

#include "common/syscall.h"

namespace space::guest {

uint64_t ParseOomKills(std::string_view vmstat) {
  constexpr std::string_view kKey = "oom_kill ";
  size_t at = 0;
  while (at < vmstat.size()) {
    size_t end = vmstat.find('\n', at);
    if (end == std::string_view::npos) end = vmstat.size();
    std::string_view line = vmstat.substr(at, end - at);
    if (line.substr(0, kKey.size()) == kKey) {
      return std::strtoull(std::string(line.substr(kKey.size())).c_str(), nullptr, 10);
    }
    at = end + 1;
  }
  return 0;
}

Result<GuestLimits> ReadGuestLimits(const std::string& root) {
  GuestLimits out;
  ASSIGN_OR_RETURN(std::string text, ReadFileToString("/proc/vmstat", 64 << 10));
  out.oom_kills = ParseOomKills(text);
  struct statfs sf;
  if (::statfs(root.c_str(), &sf) != 0) return ErrnoStatus("statfs", root, errno);
  out.disk_total = static_cast<uint64_t>(sf.f_blocks) * static_cast<uint64_t>(sf.f_bsize);
  out.disk_avail = static_cast<uint64_t>(sf.f_bavail) * static_cast<uint64_t>(sf.f_bsize);
  return out;
}

std::string EncodeGuestLimits(const GuestLimits& limits) {
  return nlohmann::json{
      {"oom_kills", limits.oom_kills}, {"disk_total", limits.disk_total}, {"disk_avail", limits.disk_avail}}
      .dump();
}

}  // namespace space::guest
