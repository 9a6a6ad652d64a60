#include "runtime/ns/launcher.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "common/clock.h"
#include "common/datagram.h"
#include "common/syscall.h"
#include "runtime/ns/mounts.h"
#include "runtime/ns/net.h"
#include "runtime/ns/seccomp.h"
#include "runtime/ns/userns.h"

namespace space::runtime::ns {
namespace {

// Everything below until CloneChild runs in the cloned child: async-signal-safe calls
// only (see child_plan.h).

// Fixed fds of the guest at exec; the report socket sits above them until exec closes it.
constexpr int kGuestChannelFd = 3;
constexpr int kGuestBinaryFd = 4;
constexpr int kReportFd = 5;
// Fds are first moved above this so the dup2s into 0..5 cannot clobber each other.
constexpr int kScratchFdFloor = 10;

int64_t ChildNowNs() {
  timespec ts;
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// Collects step reports in a fixed buffer and sends them as one message: right before
// exec, or at a failure. One message instead of one per step keeps the parent from
// waking (and competing for a CPU) at every step.
class Reporter {
 public:
  explicit Reporter(int fd) : fd_(fd) {}
  void set_fd(int fd) { fd_ = fd; }
  Step step() const { return step_; }

  void Begin(Step step) {
    step_ = step;
    start_ns_ = ChildNowNs();
  }
  // Ends the current step and starts `next`.
  void Next(Step next) {
    Add(ChildReport::kDone, Call::kNone, 0, ChildReport::kNoOp);
    Begin(next);
  }
  void Note(Call call, int err, size_t op) {
    Add(ChildReport::kNote, call, err, static_cast<uint16_t>(op));
  }
  [[noreturn]] void Fail(Call call, int err, uint16_t op = ChildReport::kNoOp) {
    Add(ChildReport::kFailed, call, err, op);
    Flush();
    ::_exit(127);
  }
  // Sends everything collected so far.
  void Flush() {
    // Best effort: if the parent is gone there is nobody to tell.
    while (n_ > 0 && ::send(fd_, reports_, n_ * sizeof(ChildReport), MSG_NOSIGNAL) < 0 &&
           errno == EINTR) {
    }
    n_ = 0;
  }

 private:
  void Add(ChildReport::Kind kind, Call call, int err, uint16_t op) {
    if (n_ == kMaxChildReports) Flush();
    ChildReport& r = reports_[n_++];
    r.kind = kind;
    r.step = static_cast<uint16_t>(step_);
    r.call = static_cast<uint16_t>(call);
    r.op = op;
    r.err = err;
    r.duration_ns = ChildNowNs() - start_ns_;
  }

  int fd_;
  Step step_ = Step::kWaitGo;
  int64_t start_ns_ = 0;
  ChildReport reports_[kMaxChildReports];
  size_t n_ = 0;
};

// Restores default dispositions (the node's handlers must not run here, and exec only
// resets caught signals, not ignored ones) and unblocks everything.
void ResetSignals() {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig)
    ::sigaction(sig, &sa, nullptr);  // EINVAL for KILL/STOP/glibc-internal: fine
  sigset_t none;
  ::sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
}

// Waits for the parent's "go" and returns the root mount fd, or -1 with errno set; the
// volumes' mount fds (exactly `n_volumes` must come) go in `volume_fds`.
// A clean EOF means the parent gave up on this launch: exit quietly.
int ReceiveGo(int fd, size_t n_volumes, int* volume_fds) {
  char byte = 0;
  iovec iov{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * (1 + kMaxVolumeMounts))];
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t n;
  do {
    n = ::recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  if (n == 0) ::_exit(1);
  if (n < 0) return -1;
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  if (byte != 'G' || c == nullptr || c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) {
    errno = EPROTO;
    return -1;
  }
  const size_t n_fds = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
  int fds[1 + kMaxVolumeMounts];
  if (n_fds == 0 || n_fds > 1 + kMaxVolumeMounts || (msg.msg_flags & MSG_CTRUNC) != 0) {
    errno = EPROTO;
    return -1;
  }
  std::memcpy(fds, CMSG_DATA(c), n_fds * sizeof(int));
  if (n_fds != 1 + n_volumes) {
    errno = EPROTO;
    return -1;
  }
  for (size_t i = 0; i < n_volumes; ++i) volume_fds[i] = fds[1 + i];
  return fds[0];
}

// Moves the guest's fds to their fixed numbers and closes everything else (the node's
// other fds, CLOEXEC or not, must not reach the sandbox). Returns 0 or an errno.
int SetupFds(const ChildPlan& p, int report_fd, Reporter* reporter, Call* call) {
  *call = Call::kDup;
  int channel = ::fcntl(p.channel_fd, F_DUPFD_CLOEXEC, kScratchFdFloor);
  int guest = ::fcntl(p.guest_fd, F_DUPFD_CLOEXEC, kScratchFdFloor);
  int report = ::fcntl(report_fd, F_DUPFD_CLOEXEC, kScratchFdFloor);
  if (channel < 0 || guest < 0 || report < 0) return errno;
  reporter->set_fd(report);
  *call = Call::kOpen;
  int null_fd = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  if (null_fd < 0) return errno;
  *call = Call::kDup;
  int devnull = ::fcntl(null_fd, F_DUPFD_CLOEXEC, kScratchFdFloor);
  if (devnull < 0) return errno;
  // dup2 clears FD_CLOEXEC: the channel and stdio survive exec; the guest binary and
  // report socket (dup3 O_CLOEXEC) do not.
  if (::dup2(channel, kGuestChannelFd) < 0 || ::dup3(guest, kGuestBinaryFd, O_CLOEXEC) < 0 ||
      ::dup3(report, kReportFd, O_CLOEXEC) < 0 || ::dup2(devnull, 0) < 0 ||
      ::dup2(devnull, 1) < 0 || ::dup2(devnull, 2) < 0) {
    return errno;
  }
  reporter->set_fd(kReportFd);
  *call = Call::kCloseRange;
  if (::syscall(SYS_close_range, kReportFd + 1, ~0U, 0) != 0) return errno;
  return 0;
}

int ChildMain(void* arg) {
  const ChildPlan& p = *static_cast<const ChildPlan*>(arg);
  Reporter r(p.sync_fd);
  Call call = Call::kNone;
  int err = 0;

  r.Begin(Step::kWaitGo);
  ResetSignals();
  // First of all, drop our copy of the node's fd table. It holds the API listener and the
  // node's ends of the sync sockets of children cloned at the same time; kept while we wait
  // for "go", a node killed now would leave those children and us waiting on each other for
  // ever (each holds the other's parent end, so no EOF comes), with the listener's port held.
  int keep[] = {0, 1, 2, p.sync_fd, p.channel_fd, p.guest_fd};
  if ((err = CloseFdsExcept(keep, sizeof keep / sizeof keep[0])) != 0) r.Fail(Call::kCloseRange, err);
  int volume_fds[kMaxVolumeMounts];
  int mount_fd = ReceiveGo(p.sync_fd, p.n_volumes, volume_fds);
  if (mount_fd < 0) r.Fail(Call::kRecvmsg, errno);

  // Timing starts after "go": waiting is the parent's time, measured there.
  // After the parent put us in the sandbox cgroups: our cgroup becomes the sandbox's
  // cgroup root, so it cannot see or name the host's hierarchy.
  r.Begin(Step::kUnshareCgroupns);
  if (::unshare(CLONE_NEWCGROUP) != 0) r.Fail(Call::kUnshare, errno);

  r.Next(Step::kMakePrivate);
  if ((err = ChildMakePrivate(&call)) != 0) r.Fail(call, err);

  // Attached by path, in this namespace: an fd opened by the parent would name the
  // host namespace's mount, which move_mount refuses (EINVAL). Done before
  // become_root while our fsuid is still host root, the owner of the run dir, so the
  // path walk needs no capability over (unmapped) host-owned directories.
  r.Next(Step::kAttachRoot);
  if ((err = ChildAttachRoot(mount_fd, p.root_dir, &call)) != 0) r.Fail(call, err);
  ::close(mount_fd);

  r.Next(Step::kBecomeRoot);
  if ((err = ChildBecomeRoot(&call)) != 0) r.Fail(call, err);

  for (size_t i = 0; i < p.n_ops; ++i) {
    const ChildOp& op = p.ops[i];
    if (op.step != r.step()) r.Next(op.step);
    if (op.kind == ChildOp::kAttachVolume) {
      err = op.fd_index >= 0 && static_cast<size_t>(op.fd_index) < p.n_volumes
                ? ChildAttachVolume(volume_fds[op.fd_index], op.target, &call)
                : EINVAL;
    } else {
      err = ChildRunOp(op, &call);
    }
    if (op.fallback_on_eperm) {
      if (err == 0) {
        ++i;  // primary worked: skip the fallback
        continue;
      }
      if (err == EPERM) {
        r.Note(call, err, i);
        continue;  // run the fallback next
      }
    }
    if (err != 0) r.Fail(call, err, static_cast<uint16_t>(i));
  }

  r.Next(Step::kPivotRoot);
  if ((err = ChildPivotRoot(&call)) != 0) r.Fail(call, err);

  r.Next(Step::kSetHostname);
  if (::sethostname(p.hostname, p.hostname_len) != 0) r.Fail(Call::kSethostname, errno);

  r.Next(Step::kLoopbackUp);
  if ((err = ChildLoopbackUp(&call)) != 0) r.Fail(call, err);

  r.Next(Step::kSetupFds);
  if ((err = SetupFds(p, p.sync_fd, &r, &call)) != 0) r.Fail(call, err);

  // No setuid/file-capability gains after exec, for spaced and everything it starts;
  // also what lets an unprivileged-in-init-ns process install a seccomp filter.
  r.Next(Step::kNoNewPrivs);
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) r.Fail(Call::kPrctl, errno);

  r.Next(Step::kSeccomp);
  if ((err = ChildLoadSeccomp(&p.seccomp)) != 0) r.Fail(Call::kSeccomp, err);

  r.Next(Step::kExec);
  r.Flush();
  ::syscall(SYS_execveat, kGuestBinaryFd, "", p.argv, p.envp, AT_EMPTY_PATH);
  r.Fail(Call::kExecveat, errno);
}

}  // namespace

Result<Spawned> CloneChild(const ChildPlan& plan) {
  // The child runs on its own copy of this buffer (no CLONE_VM); it needs little stack.
  constexpr size_t kStackSize = 128 * 1024;
  auto stack = std::make_unique<char[]>(kStackSize);
  constexpr int kFlags = CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWUTS |
                         CLONE_NEWIPC | CLONE_PIDFD | SIGCHLD;
  sigset_t all, old;
  ::sigfillset(&all);
  ::pthread_sigmask(SIG_BLOCK, &all, &old);
  int pidfd = -1;
  pid_t pid =
      ::clone(ChildMain, stack.get() + kStackSize, kFlags, const_cast<ChildPlan*>(&plan), &pidfd);
  int err = errno;
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (pid < 0) return ErrnoStatus("clone", "CLONE_NEWUSER|CLONE_NEWPID|CLONE_NEWNS|...", err);
  return Spawned{pid, UniqueFd(pidfd)};
}

Status SendGo(int sync_fd, int mount_fd, const std::vector<int>& volume_fds) {
  std::vector<int> fds = {mount_fd};
  fds.insert(fds.end(), volume_fds.begin(), volume_fds.end());
  return SendDatagram(sync_fd, "G", fds, {1, 1 + kMaxVolumeMounts, "sync socket"}).Annotate("go");
}

Result<ChildOutcome> CollectReports(int sync_fd, int64_t timeout_ns) {
  ChildOutcome out;
  const int64_t deadline = MonoNowNs() + timeout_ns;
  for (;;) {
    int64_t left_ms = (deadline - MonoNowNs()) / 1'000'000;
    if (left_ms <= 0) return DeadlineExceeded("child setup did not finish in time");
    pollfd pfd{sync_fd, POLLIN, 0};
    int rc = RetryEintr([&] { return ::poll(&pfd, 1, static_cast<int>(left_ms)); });
    if (rc < 0) return ErrnoStatus("poll", "sync socket", errno);
    if (rc == 0) continue;
    ChildReport batch[kMaxChildReports];
    ssize_t n = RetryEintr([&] { return ::recv(sync_fd, batch, sizeof batch, 0); });
    if (n < 0) return ErrnoStatus("recv", "sync socket", errno);
    if (n == 0) {
      out.eof_ns = MonoNowNs();
      return out;
    }
    if (n % static_cast<ssize_t>(sizeof(ChildReport)) != 0) return Internal("malformed child report");
    out.last_report_ns = MonoNowNs();
    for (size_t i = 0; i < static_cast<size_t>(n) / sizeof(ChildReport); ++i) {
      const ChildReport& r = batch[i];
      if (r.step >= static_cast<uint16_t>(Step::kCount) ||
          r.call >= static_cast<uint16_t>(Call::kCount)) {
        return Internal("malformed child report");
      }
      out.reports.push_back(r);
      if (r.kind == ChildReport::kFailed) return out;
    }
  }
}

}  // namespace space::runtime::ns
