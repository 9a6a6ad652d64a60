#include "common/host_slots.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/statfs.h>
#include <linux/magic.h>

#include "common/syscall.h"

namespace space {

std::string HostRunDir() {
  struct statfs st;
  if (::statfs("/run", &st) == 0 && st.f_type == TMPFS_MAGIC) return "/run/space";
  return "/dev/shm/space";  // some hosts keep /run on disk; /dev/shm is always tmpfs
}

Result<bool> HostSlots::TryLock(int64_t slot) {
  if (held_.count(slot)) return false;
  std::string path = lock_dir_ + "/" + std::to_string(slot) + ".lock";
  ASSIGN_OR_RETURN(UniqueFd fd, OpenFd(path, O_RDWR | O_CREAT, 0600));
  if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK) return false;
    return ErrnoStatus("flock", path, errno);
  }
  held_.emplace(slot, std::move(fd));
  return true;
}

Result<int64_t> HostSlots::Acquire(int64_t preferred) {
  std::lock_guard<std::mutex> lock(mu_);
  RETURN_IF_ERROR(MakeDirs(lock_dir_, 0700));
  if (preferred >= 0 && preferred < kMaxSlots) {
    ASSIGN_OR_RETURN(bool got, TryLock(preferred));
    if (got) return preferred;
  }
  for (int64_t s = 0; s < kMaxSlots; ++s) {
    ASSIGN_OR_RETURN(bool got, TryLock(s));
    if (got) return s;
  }
  return ResourceExhausted("no free host uid range: " + std::to_string(kMaxSlots) + " sandboxes on this host");
}

bool HostSlots::Held(int64_t slot) {
  std::lock_guard<std::mutex> lock(mu_);
  return held_.count(slot) != 0;
}

void HostSlots::Release(int64_t slot) {
  std::lock_guard<std::mutex> lock(mu_);
  held_.erase(slot);  // closing the fd drops the flock
}

}  // namespace space
