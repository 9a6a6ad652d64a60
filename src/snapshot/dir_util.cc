#include "snapshot/dir_util.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>

#include "common/syscall.h"

namespace space::snapshot {

Result<UniqueFd> OpenDirAt(int parent_fd, const std::string& name, const std::string& what) {
  int fd = RetryEintr(
      [&] { return ::openat(parent_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC); });
  if (fd < 0) return ErrnoStatus("openat", what, errno);
  return UniqueFd(fd);
}

Status FsyncDir(int dir_fd, const std::string& what) {
  if (RetryEintr([&] { return ::fsync(dir_fd); }) != 0) return ErrnoStatus("fsync", what, errno);
  return Status::Ok();
}

}  // namespace space::snapshot
