#include "snapshot/store_lock.h"

#include <fcntl.h>
#include <sys/file.h>

#include <cerrno>

#include "common/status.h"

namespace space::snapshot {

Result<StoreLock> StoreLock::Shared(const std::string& store_dir) { return Take(store_dir, LOCK_SH); }
Result<StoreLock> StoreLock::Exclusive(const std::string& store_dir) { return Take(store_dir, LOCK_EX); }

Result<StoreLock> StoreLock::Take(const std::string& store_dir, int operation) {
  const std::string path = store_dir + "/.lock";
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd) return ErrnoStatus("open", path, errno);
  while (::flock(fd.get(), operation) != 0) {
    if (errno != EINTR) return ErrnoStatus("flock", path, errno);
  }
  return StoreLock(std::move(fd));
}

}  // namespace space::snapshot
