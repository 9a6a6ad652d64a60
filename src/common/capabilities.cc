#include "common/capabilities.h"

#include <linux/capability.h>
#include <grp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <string>

#include "common/syscall.h"

namespace space {
namespace {

bool Capget(__user_cap_data_struct (&data)[2]) {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  return ::syscall(SYS_capget, &header, data) == 0;
}

}  // namespace

int LastCapability() {
  auto text = ReadFileToString("/proc/sys/kernel/cap_last_cap", 64);
  if (text.ok()) {
    int v = std::atoi(text->c_str());
    if (v > 0 && v < 64) return v;
  }
  return CAP_LAST_CAP;
}

Status DropCapabilities(const std::vector<int>& caps) {
  const int last = LastCapability();
  __user_cap_data_struct data[2] = {};
  if (!Capget(data)) return ErrnoStatus("capget", "self", errno);
  for (int cap : caps) {
    if (cap < 0 || cap > last) continue;
    if (::prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0) {
      return ErrnoStatus("prctl", "PR_CAPBSET_DROP " + std::to_string(cap), errno);
    }
    if (::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_LOWER, cap, 0, 0) != 0 && errno != EINVAL) {
      return ErrnoStatus("prctl", "PR_CAP_AMBIENT_LOWER " + std::to_string(cap), errno);
    }
    const uint32_t bit = 1u << (cap % 32);
    data[cap / 32].effective &= ~bit;
    data[cap / 32].permitted &= ~bit;
    data[cap / 32].inheritable &= ~bit;
  }
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  if (::syscall(SYS_capset, &header, data) != 0) return ErrnoStatus("capset", "self", errno);
  return Status::Ok();
}

Status BecomeUserKeepingCapabilities(uid_t uid, gid_t gid, const std::vector<int>& inheritable) {
  auto status = ReadFileToString("/proc/self/status", 64 << 10);
  if (!status.ok()) return status.status();
  if (status->find("\nThreads:\t1\n") == std::string::npos) {
    return Internal("switching to uid " + std::to_string(uid) + ": the process has more than one thread");
  }
  if (::prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) != 0) return ErrnoStatus("prctl", "PR_SET_KEEPCAPS", errno);
  if (::setgroups(0, nullptr) != 0) return ErrnoStatus("setgroups", "none", errno);
  if (::setresgid(gid, gid, gid) != 0) return ErrnoStatus("setresgid", std::to_string(gid), errno);
  if (::setresuid(uid, uid, uid) != 0) return ErrnoStatus("setresuid", std::to_string(uid), errno);
  if (::prctl(PR_SET_KEEPCAPS, 0, 0, 0, 0) != 0) return ErrnoStatus("prctl", "PR_SET_KEEPCAPS", errno);
  // The uid change emptied the effective set (and the ambient one); the permitted set stayed.
  __user_cap_data_struct data[2] = {};
  if (!Capget(data)) return ErrnoStatus("capget", "self", errno);
  for (auto& d : data) {
    d.effective = d.permitted;
    d.inheritable = 0;
  }
  for (int cap : inheritable) {
    if (cap >= 0 && cap < 64) data[cap / 32].inheritable |= (1u << (cap % 32)) & data[cap / 32].permitted;
  }
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  if (::syscall(SYS_capset, &header, data) != 0) return ErrnoStatus("capset", "self", errno);
  return Status::Ok();
}

bool HasEffectiveCapability(int cap) {
  __user_cap_data_struct data[2] = {};
  if (cap < 0 || cap > 63 || !Capget(data)) return false;
  return (data[cap / 32].effective & (1u << (cap % 32))) != 0;
}

bool InBoundingSet(int cap) { return ::prctl(PR_CAPBSET_READ, cap, 0, 0, 0) == 1; }

}  // namespace space
