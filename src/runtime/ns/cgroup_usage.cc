// Cgroups::Usage: CPU time and memory of a sandbox, read from its cgroup files (v1 or v2).
#include <sstream>

#include "common/syscall.h"
#include "runtime/ns/cgroup.h"

namespace space::runtime::ns {
namespace {

// The value of `key` in a "key value" per line file (memory.stat, cpu.stat); 0 when absent.
uint64_t StatValue(const std::string& text, const std::string& key) {
  std::istringstream in(text);
  std::string k;
  uint64_t v = 0;
  while (in >> k >> v) {
    if (k == key) return v;
  }
  return 0;
}

Result<uint64_t> ReadNumber(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, ReadFileToString(path, 4096));
  try {
    return static_cast<uint64_t>(std::stoull(text));
  } catch (const std::exception&) {
    return Internal("unexpected content in " + path);
  }
}

}  // namespace

Result<ResourceUsage> Cgroups::Usage(const std::string& id) const {
  ResourceUsage u;
  if (v2_) {
    const std::string dir = Dir(hierarchies_.front(), id);
    ASSIGN_OR_RETURN(std::string cpu, ReadFileToString(dir + "/cpu.stat", 4096));
    u.cpu_ns = StatValue(cpu, "usage_usec") * 1000;
    ASSIGN_OR_RETURN(u.memory_bytes, ReadNumber(dir + "/memory.current"));
    ASSIGN_OR_RETURN(std::string mem, ReadFileToString(dir + "/memory.stat", 64 << 10));
    u.cache_bytes = StatValue(mem, "file");
    // memory.events and pids.events exist on every v2 kernel we run on (4.19+ for oom_kill).
    ASSIGN_OR_RETURN(std::string mem_events, ReadFileToString(dir + "/memory.events", 4096));
    u.oom_kills = StatValue(mem_events, "oom_kill");
    ASSIGN_OR_RETURN(std::string pids_events, ReadFileToString(dir + "/pids.events", 4096));
    u.pids_max_hits = StatValue(pids_events, "max");
    return u;
  }
  if (const Hierarchy* h = Find("cpuacct")) {
    ASSIGN_OR_RETURN(u.cpu_ns, ReadNumber(Dir(*h, id) + "/cpuacct.usage"));
  }
  const Hierarchy* m = Find("memory");
  if (m == nullptr) return Unavailable("no memory cgroup hierarchy");
  ASSIGN_OR_RETURN(u.memory_bytes, ReadNumber(Dir(*m, id) + "/memory.usage_in_bytes"));
  ASSIGN_OR_RETURN(std::string mem, ReadFileToString(Dir(*m, id) + "/memory.stat", 64 << 10));
  u.cache_bytes = StatValue(mem, "total_cache");
  // v1 reports OOM kills in memory.oom_control ("oom_kill N", Linux 4.13+) and refused forks
  // in pids.events ("max N", Linux 4.3+); an older kernel without them reads as 0.
  if (auto oom = ReadFileToString(Dir(*m, id) + "/memory.oom_control", 4096); oom.ok()) {
    u.oom_kills = StatValue(*oom, "oom_kill");
  }
  if (const Hierarchy* p = Find("pids")) {
    if (auto events = ReadFileToString(Dir(*p, id) + "/pids.events", 4096); events.ok()) {
      u.pids_max_hits = StatValue(*events, "max");
    }
  }
  return u;
}

}  // namespace space::runtime::ns
