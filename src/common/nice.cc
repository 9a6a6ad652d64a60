#include "common/route.h"
#include "common/nice.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <memory>
#include <string>

namespace space {
namespace {

space::Route<NiceRoute> nice_route;

Status CheckNice(int nice) {
  if (nice < 0 || nice > 19) return InvalidArgument("nice value " + std::to_string(nice) + " is outside 0..19");
  return Status::Ok();
}

}  // namespace

void SetNiceRoute(NiceRoute r) {
  nice_route.Set(r.child || r.thread ? std::make_shared<const NiceRoute>(std::move(r)) : nullptr);
}

Status SetChildNice(int pidfd, pid_t pid, int nice) {
  RETURN_IF_ERROR(CheckNice(nice));
  if (::setpriority(PRIO_PROCESS, static_cast<id_t>(pid), nice) == 0) return Status::Ok();
  const int err = errno;
  auto r = nice_route.Get();
  if ((err != EPERM && err != EACCES) || !r || !r->child) {
    return ErrnoStatus("setpriority", "child " + std::to_string(pid), err);
  }
  return r->child(pidfd, nice).Annotate("nice of child " + std::to_string(pid));
}

Status SetThreadNice(int nice) {
  RETURN_IF_ERROR(CheckNice(nice));
  // PRIO_PROCESS with 0 names the calling thread on Linux.
  if (::setpriority(PRIO_PROCESS, 0, nice) == 0) return Status::Ok();
  const int err = errno;
  auto r = nice_route.Get();
  if ((err != EPERM && err != EACCES) || !r || !r->thread) return ErrnoStatus("setpriority", "this thread", err);
  return r->thread(::gettid(), nice).Annotate("nice of this thread");
}

}  // namespace space
