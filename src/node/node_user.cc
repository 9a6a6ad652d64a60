#include "node/node_user.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/syscall.h"

namespace space::node {
namespace {

// Deep enough for a snapshot store's fan-out and a run dir; deeper trees are not the node's.
constexpr int kMaxDepth = 16;

Status GiveEntries(int dir_fd, const std::string& what, dev_t dev, uid_t uid, int depth) {
  if (depth > kMaxDepth) return Conflict(what + ": deeper than " + std::to_string(kMaxDepth) + " levels");
  DIR* d = ::fdopendir(::fcntl(dir_fd, F_DUPFD_CLOEXEC, 0));
  if (d == nullptr) return ErrnoStatus("fdopendir", what, errno);
  Status st = Status::Ok();
  while (struct dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    // Each entry through its own O_PATH descriptor: what is checked is what is changed, even
    // were a process of the node's uid to swap the name meanwhile (it owns these directories).
    UniqueFd f(::openat(dir_fd, name.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
    struct stat sb;
    if (!f.valid() || ::fstat(f.get(), &sb) != 0) continue;  // gone meanwhile
    if (sb.st_dev != dev || S_ISLNK(sb.st_mode)) continue;
    if (sb.st_uid == 0 && (S_ISDIR(sb.st_mode) || sb.st_nlink == 1) &&
        ::fchownat(f.get(), "", uid, uid, AT_EMPTY_PATH) != 0) {
      st = ErrnoStatus("fchownat", what + "/" + name, errno);
      break;
    }
    if (!S_ISDIR(sb.st_mode)) continue;
    UniqueFd sub(::openat(f.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!sub.valid()) {
      st = ErrnoStatus("open", what + "/" + name, errno);
      break;
    }
    st = GiveEntries(sub.get(), what + "/" + name, dev, uid, depth + 1);
    if (!st.ok()) break;
  }
  ::closedir(d);
  return st;
}

}  // namespace

Status GiveToNodeUser(const std::vector<NodeDir>& dirs, uid_t uid) {
  for (const NodeDir& dir : dirs) {
    RETURN_IF_ERROR(MakeDirs(dir.path, dir.mode));
    ASSIGN_OR_RETURN(UniqueFd fd, OpenFd(dir.path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    struct stat sb;
    if (::fstat(fd.get(), &sb) != 0) return ErrnoStatus("fstat", dir.path, errno);
    // The top last: an interrupted hand-over is done again at the next start.
    if (dir.recursive && sb.st_uid == 0) RETURN_IF_ERROR(GiveEntries(fd.get(), dir.path, sb.st_dev, uid, 0));
    for (const std::string& name : dir.files) {
      UniqueFd f(::openat(fd.get(), name.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
      struct stat fb;
      if (!f.valid() || ::fstat(f.get(), &fb) != 0) continue;
      if (!S_ISREG(fb.st_mode) || fb.st_uid != 0 || fb.st_nlink != 1) continue;
      if (::fchownat(f.get(), "", uid, uid, AT_EMPTY_PATH) != 0) {
        return ErrnoStatus("fchownat", dir.path + "/" + name, errno);
      }
    }
    if (sb.st_uid == 0 && ::fchown(fd.get(), uid, uid) != 0) return ErrnoStatus("fchown", dir.path, errno);
  }
  return Status::Ok();
}

}  // namespace space::node
