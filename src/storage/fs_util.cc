#include "storage/fs_util.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "common/syscall.h"

namespace space::storage {

namespace {

Status RemoveAt(int parent_fd, const std::string& name, const std::string& path) {
  struct stat st;
  if (::fstatat(parent_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) return Status::Ok();
    return ErrnoStatus("fstatat", path, errno);
  }
  if (S_ISDIR(st.st_mode)) {
    int fd = ::openat(parent_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return ErrnoStatus("openat", path, errno);
    UniqueFd dir(fd);
    ASSIGN_OR_RETURN(std::vector<std::string> names, ListDirAt(dir.get(), path));
    for (const auto& n : names) RETURN_IF_ERROR(RemoveAt(dir.get(), n, path + "/" + n));
    if (::unlinkat(parent_fd, name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT) {
      return ErrnoStatus("rmdir", path, errno);
    }
    return Status::Ok();
  }
  if (::unlinkat(parent_fd, name.c_str(), 0) != 0 && errno != ENOENT) return ErrnoStatus("unlink", path, errno);
  return Status::Ok();
}

}  // namespace

Status RemoveTree(const std::string& path) {
  if (path.empty() || path == "/") return InvalidArgument("refusing to remove '" + path + "'");
  size_t slash = path.find_last_of('/');
  std::string parent = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  if (name.empty() || name == "." || name == "..") return InvalidArgument("refusing to remove '" + path + "'");
  int fd = ::open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return Status::Ok();
    return ErrnoStatus("open", parent, errno);
  }
  UniqueFd parent_fd(fd);
  return RemoveAt(parent_fd.get(), name, path);
}

Result<std::vector<std::string>> ListDir(const std::string& path) {
  ASSIGN_OR_RETURN(UniqueFd fd, OpenFd(path, O_RDONLY | O_DIRECTORY));
  return ListDirAt(fd.get(), path);
}

bool PathExists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

}  // namespace space::storage
