#include "common/nice.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <memory>
#include <string>

namespace space {
namespace {

Status CheckNice(int nice) {
  if (nice < 0 || nice > 19) return InvalidArgument("nice value " + std::to_string(nice) + " is outside 0..19");
  return Status::Ok();
}

}  // namespace

Status SetChildNice(PrivilegedActs* acts, int pidfd, pid_t pid, int nice) {
  RETURN_IF_ERROR(CheckNice(nice));
  if (::setpriority(PRIO_PROCESS, static_cast<id_t>(pid), nice) == 0) return Status::Ok();
  const int err = errno;
  if ((err != EPERM && err != EACCES) || acts == nullptr) {
    return ErrnoStatus("setpriority", "child " + std::to_string(pid), err);
  }
  return acts->SetChildNice(pidfd, nice).Annotate("nice of child " + std::to_string(pid));
}

Status SetThreadNice(PrivilegedActs* acts, int nice) {
  RETURN_IF_ERROR(CheckNice(nice));
  // PRIO_PROCESS with 0 names the calling thread on Linux.
  if (::setpriority(PRIO_PROCESS, 0, nice) == 0) return Status::Ok();
  const int err = errno;
  if ((err != EPERM && err != EACCES) || acts == nullptr) return ErrnoStatus("setpriority", "this thread", err);
  return acts->SetThreadNice(::gettid(), nice).Annotate("nice of this thread");
}

}  // namespace space
