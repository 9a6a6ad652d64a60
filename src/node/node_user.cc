#include "node/node_user.h"

#include <fcntl.h>
#include <grp.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include "common/dir.h"
#include "common/syscall.h"

namespace space::node {
namespace {

// Deep enough for a snapshot store's fan-out and a run dir; deeper trees are not the node's.
constexpr int kMaxDepth = 16;

Status GiveEntries(int dir_fd, const std::string& what, dev_t dev, uid_t uid, int depth) {
  if (depth > kMaxDepth) return Conflict(what + ": deeper than " + std::to_string(kMaxDepth) + " levels");
  ASSIGN_OR_RETURN(std::vector<std::string> names, ListDirAt(dir_fd, what));
  for (const std::string& name : names) {
    // Each entry through its own O_PATH descriptor: what is checked is what is changed, even
    // were a process of the node's uid to swap the name meanwhile (it owns these directories).
    UniqueFd f(::openat(dir_fd, name.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
    struct stat sb;
    if (!f.valid() || ::fstat(f.get(), &sb) != 0) continue;  // gone meanwhile
    if (sb.st_dev != dev || S_ISLNK(sb.st_mode)) continue;
    if (sb.st_uid == 0 && (S_ISDIR(sb.st_mode) || sb.st_nlink == 1) &&
        ::fchownat(f.get(), "", uid, uid, AT_EMPTY_PATH) != 0) {
      return ErrnoStatus("fchownat", what + "/" + name, errno);
    }
    if (!S_ISDIR(sb.st_mode)) continue;
    UniqueFd sub(::openat(f.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!sub.valid()) return ErrnoStatus("open", what + "/" + name, errno);
    RETURN_IF_ERROR(GiveEntries(sub.get(), what + "/" + name, dev, uid, depth + 1));
  }
  return Status::Ok();
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

Status CheckNodeCanReach(const std::vector<NodeDir>& dirs, uid_t uid) {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return ErrnoStatus("pipe2", "reach check", errno);
  UniqueFd answer_r(p[0]), answer_w(p[1]);
  const pid_t pid = ::fork();
  if (pid < 0) return ErrnoStatus("fork", "reach check", errno);
  if (pid == 0) {
    answer_r.reset();
    std::string message;
    if (::setgroups(0, nullptr) != 0 || ::setresgid(uid, uid, uid) != 0 || ::setresuid(uid, uid, uid) != 0) {
      message = std::string("switching to uid ") + std::to_string(uid) + ": " + std::strerror(errno);
    }
    for (const NodeDir& dir : dirs) {
      if (!message.empty() || ::access(dir.path.c_str(), R_OK | W_OK | X_OK) == 0) continue;
      const int err = errno;
      // The first directory on the way that this uid may not search.
      std::string blocker = dir.path;
      for (size_t slash = dir.path.find('/', 1); slash != std::string::npos; slash = dir.path.find('/', slash + 1)) {
        const std::string above = dir.path.substr(0, slash);
        if (::access(above.c_str(), X_OK) != 0) {
          blocker = above;
          break;
        }
      }
      message = "the node runs as uid " + std::to_string(uid) + " and cannot reach " + dir.path + " (" +
                std::strerror(err) + "): " + blocker + " must let others search it (chmod o+x), or choose a " +
                "directory elsewhere";
    }
    (void)!::write(answer_w.get(), message.data(), message.size());
    ::_exit(0);
  }
  answer_w.reset();
  std::string message;
  char buf[1024];
  for (ssize_t n; (n = RetryEintr([&] { return ::read(answer_r.get(), buf, sizeof buf); })) > 0;) {
    message.append(buf, static_cast<size_t>(n));
  }
  int status = 0;
  if (RetryEintr([&] { return ::waitpid(pid, &status, 0); }) < 0) return ErrnoStatus("waitpid", "reach check", errno);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return Internal("reach check: the child failed");
  if (!message.empty()) return PermissionDenied(message);
  return Status::Ok();
}

}  // namespace space::node
