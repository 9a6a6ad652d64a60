#include "front/front_process.h"

#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>

#include "common/datagram.h"
#include "common/helper_spawn.h"
#include "common/host_slots.h"
#include "common/kill_child.h"
#include "common/log.h"
#include "common/syscall.h"
#include "front/front.h"

namespace space::front {
namespace {

constexpr int kChannelFd = 3;
constexpr int kListenFd = 4;
constexpr int kReadyTimeoutMs = 10000;
// A front that keeps dying is restarted at most this often.
constexpr auto kRestartDelay = std::chrono::milliseconds(500);

}  // namespace

Result<std::unique_ptr<FrontProcess>> FrontProcess::Start(UniqueFd listen_fd, api::HttpServer* server,
                                                          HelperUser user, PrivilegedActs* privileged) {
  // A front that does not start as root cannot make its empty root itself.
  if (user.map_ids) RETURN_IF_ERROR(MakeFrontRoot(HostRunDir() + "/empty"));
  std::unique_ptr<FrontProcess> f(new FrontProcess(std::move(listen_fd), server, std::move(user), privileged));
  ASSIGN_OR_RETURN(UniqueFd pidfd, f->Spawn());
  f->supervisor_ = std::thread([p = f.get(), fd = std::move(pidfd)]() mutable { p->Supervise(std::move(fd)); });
  return f;
}

Result<UniqueFd> FrontProcess::Spawn() {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) return ErrnoStatus("socketpair", "API front", errno);
  UniqueFd mine(sv[0]), theirs(sv[1]);
  HelperSpec spec;
  spec.args = {"space", "api-front", "--channel-fd", std::to_string(kChannelFd), "--listen-fd", std::to_string(kListenFd),
               "--node-pid", std::to_string(::getpid())};
  spec.fds = {{theirs.get(), kChannelFd}, {listen_fd_.get(), kListenFd}};
  spec.ignore_stop_signals = true;  // a Ctrl-C reaches the process group; the front ends with its channel
  spec.user = user_;
  Result<pid_t> spawned = SpawnHelper(spec);
  if (!spawned.ok()) return spawned.status().Annotate("API front");
  const pid_t pid = *spawned;
  theirs.reset();
  UniqueFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
  auto fail = [&](Status st) {
    // A kill that fails (the root broker gone, the node stopping) is not waited on: the front
    // ends when its channel closes, and stays a zombie until the node exits.
    if (Status k = KillChildPid(privileged_, pid); k.ok()) ::waitpid(pid, nullptr, 0);
    return st;
  };
  if (!pidfd.valid()) return fail(ErrnoStatus("pidfd_open", "API front", errno));
  // Its first datagram says it dropped root and accepts next; exiting instead closes the channel.
  pollfd p{mine.get(), POLLIN, 0};
  if (RetryEintr([&] { return ::poll(&p, 1, kReadyTimeoutMs); }) <= 0) {
    return fail(DeadlineExceeded("API front: not ready in 10 s"));
  }
  Result<Datagram> ready = ReceiveDatagram(mine.get(), api::kConnectionChannelLimits);
  if (!ready.ok() || ready->bytes != "ready" || !ready->fds.empty()) {
    return fail(Unavailable("API front did not start (its error is in the log above)"));
  }
  pid_ = pid;
  server_->ServeChannel(std::move(mine));
  return pidfd;
}

void FrontProcess::Supervise(UniqueFd pidfd) {
  for (;;) {
    pollfd p{pidfd.get(), POLLIN, 0};
    while (RetryEintr([&] { return ::poll(&p, 1, 250); }) <= 0) {
      std::lock_guard<std::mutex> lock(mu_);
      if (unkillable_) return;
    }
    int status = 0;
    const pid_t exited = pid_.exchange(-1);  // reaped: its number may name another process now
    ::waitpid(exited, &status, 0);
    std::unique_lock<std::mutex> lock(mu_);
    if (stopping_) return;
    LogError("front", "the API front (pid " + std::to_string(exited) + ") exited with status " +
                          std::to_string(status) + "; starting a new one");
    for (;;) {
      if (cv_.wait_for(lock, kRestartDelay, [this] { return stopping_; })) return;
      lock.unlock();
      Result<UniqueFd> next = Spawn();
      lock.lock();
      if (next.ok()) {
        pidfd = std::move(*next);
        if (!stopping_) break;
        // Stop came while it was starting.
        if (Status k = KillChild(privileged_, pidfd.get()); k.ok()) ::waitpid(pid_.load(), nullptr, 0);
        return;
      }
      LogError("front", next.status().ToString());
    }
  }
}

void FrontProcess::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  cv_.notify_all();
  // The front ignores SIGTERM (a Ctrl-C reaches the process group); it ends when the node's
  // server closes its channel, or here.
  // Unkillable only when the root broker is gone, and then the node exits next (the front
  // dies with it): the supervisor stops waiting for its exit.
  pid_t pid = pid_.load();
  if (Status killed = pid > 0 ? KillChildPid(privileged_, pid) : Status::Ok(); !killed.ok()) {
    LogWarn("front", killed.ToString());
    std::lock_guard<std::mutex> lock(mu_);
    unkillable_ = true;
  }
  if (supervisor_.joinable()) supervisor_.join();
}

}  // namespace space::front
