#include "common/dir.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "common/status.h"

namespace space {

Result<std::vector<std::string>> ListDirAt(int dir_fd, const std::string& what) {
  // fdopendir takes ownership of its fd, so hand it a duplicate.
  int dup = ::fcntl(dir_fd, F_DUPFD_CLOEXEC, 0);
  if (dup < 0) return ErrnoStatus("fcntl F_DUPFD", what, errno);
  DIR* d = ::fdopendir(dup);
  if (d == nullptr) {
    int e = errno;
    ::close(dup);
    return ErrnoStatus("fdopendir", what, e);
  }
  // The duplicate shares the file offset with dir_fd; start from the top regardless.
  ::rewinddir(d);
  std::vector<std::string> names;
  int err = 0;
  for (;;) {
    errno = 0;
    struct dirent* e = ::readdir(d);
    if (e == nullptr) {
      err = errno;
      break;
    }
    std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(std::move(n));
  }
  ::closedir(d);
  if (err != 0) return ErrnoStatus("readdir", what, err);
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace space
