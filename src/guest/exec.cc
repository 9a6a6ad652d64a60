#include "guest/exec.h"

#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <map>

#include "common/syscall.h"

namespace space::guest {
namespace {

// What a child that failed before execve writes to the report pipe.
struct ChildReport {
  char step[16];
  int err;
};

// The whole child-side plan, prepared before fork so the child only makes syscalls.
struct ChildPlan {
  std::vector<char*> argv;
  std::vector<char*> envp;
  std::vector<std::string> candidates;
  const char* cwd = nullptr;
  bool cwd_fallback_root = false;  // the cwd is the user's home: fall back to "/"
  bool drop_privileges = false;
  // Root of an ns sandbox: CAP_SYS_ADMIN goes (ExecContext.root_keeps_sys_admin).
  bool drop_sys_admin = false;
  bool set_groups = false;
  std::vector<gid_t> groups;
  uid_t uid = 0;
  gid_t gid = 0;
  int last_cap = -1;  // -1: unknown, drop until EINVAL
  int stdin_fd = -1, stdout_fd = -1, stderr_fd = -1, report_fd = -1;
  bool tty = false;  // stdin_fd is the pty slave: make it the controlling terminal
};

[[noreturn]] void FailChild(int report_fd, const char* step, int err) {
  ChildReport r{};
  std::strncpy(r.step, step, sizeof r.step - 1);
  r.err = err;
  // Nothing to do if the report is lost: the parent then sees a plain exit.
  (void)!::write(report_fd, &r, sizeof r);
  ::_exit(127);
}

[[noreturn]] void RunChild(const ChildPlan& p) {
  // Undo spaced's own signal setup: ignored dispositions and the blocked mask survive
  // execve, and a child that starts with SIGPIPE ignored or SIGCHLD blocked misbehaves.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < 65; ++sig) ::sigaction(sig, &dfl, nullptr);  // EINVAL for KILL/STOP
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);

  // Own session and process group, so kSignal and the timeout reach the whole job.
  if (::setsid() < 0) FailChild(p.report_fd, "setsid", errno);
  // A session leader without a terminal acquires the slave as its controlling terminal
  // (what login and sshd do), so job control, /dev/tty and SIGWINCH work.
  if (p.tty && ::ioctl(p.stdin_fd, TIOCSCTTY, 0) != 0) FailChild(p.report_fd, "tiocsctty", errno);
  // spaced keeps fds 0-2 open, so the pipe ends are >= 3 and dup2 cannot clobber them.
  if (::dup2(p.stdin_fd, 0) < 0) FailChild(p.report_fd, "dup2", errno);
  if (::dup2(p.stdout_fd, 1) < 0) FailChild(p.report_fd, "dup2", errno);
  if (::dup2(p.stderr_fd, 2) < 0) FailChild(p.report_fd, "dup2", errno);

  if (::chdir(p.cwd) != 0) {
    if (!p.cwd_fallback_root || ::chdir("/") != 0) FailChild(p.report_fd, "chdir", errno);
  }

  if (p.drop_sys_admin) {
    // From the bounding and inheritable sets (what an exec as uid 0 recomputes its sets from)
    // and the current ones, so neither the command nor anything it execs has it.
    if (::prctl(PR_CAPBSET_DROP, CAP_SYS_ADMIN, 0, 0, 0) != 0) FailChild(p.report_fd, "capbset_drop", errno);
    __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {};
    if (::syscall(SYS_capget, &hdr, data) != 0) FailChild(p.report_fd, "capget", errno);
    auto& word = data[CAP_TO_INDEX(CAP_SYS_ADMIN)];
    word.effective &= ~CAP_TO_MASK(CAP_SYS_ADMIN);
    word.permitted &= ~CAP_TO_MASK(CAP_SYS_ADMIN);
    word.inheritable &= ~CAP_TO_MASK(CAP_SYS_ADMIN);
    if (::syscall(SYS_capset, &hdr, data) != 0) FailChild(p.report_fd, "capset", errno);
  }
  if (p.drop_privileges) {
    if (p.set_groups && ::setgroups(p.groups.size(), p.groups.data()) != 0) {
      FailChild(p.report_fd, "setgroups", errno);
    }
    // The bounding set must shrink while we still hold CAP_SETPCAP, i.e. before setresuid;
    // otherwise a file-capability binary could regain capabilities.
    int limit = p.last_cap >= 0 ? p.last_cap : 63;
    for (int cap = 0; cap <= limit; ++cap) {
      if (::prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0) {
        if (errno == EINVAL && p.last_cap < 0) break;  // past the kernel's last capability
        FailChild(p.report_fd, "capbset_drop", errno);
      }
    }
    // EINVAL: kernel without ambient capabilities (< 4.3), nothing to clear.
    if (::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 && errno != EINVAL) {
      FailChild(p.report_fd, "ambient_clear", errno);
    }
    if (::setresgid(p.gid, p.gid, p.gid) != 0) FailChild(p.report_fd, "setresgid", errno);
    if (::setresuid(p.uid, p.uid, p.uid) != 0) FailChild(p.report_fd, "setresuid", errno);
  }

  // execvp's rules: keep looking past entries that do not exist, remember EACCES.
  int err = ENOENT;
  bool saw_eacces = false;
  for (const std::string& path : p.candidates) {
    ::execve(path.c_str(), p.argv.data(), p.envp.data());
    err = errno;
    if (err == EACCES) {
      saw_eacces = true;
    } else if (err != ENOENT && err != ENOTDIR && err != ESTALE && err != ELOOP && err != ENAMETOOLONG) {
      break;
    }
  }
  FailChild(p.report_fd, "exec", saw_eacces && err != ENOEXEC ? EACCES : err);
}

int ReadLastCap() {
  auto s = ReadFileToString("/proc/sys/kernel/cap_last_cap", 64);
  if (!s.ok()) return -1;
  int v = -1;
  auto [ptr, ec] = std::from_chars(s->data(), s->data() + s->size(), v);
  (void)ptr;
  return ec == std::errc() && v >= 0 && v < 64 ? v : -1;
}

// setgroups(2) is refused in a user namespace whose /proc/self/setgroups says "deny"
// (user_namespaces(7)); then the process keeps spaced's (unmapped) groups.
bool SetgroupsAllowed() {
  auto s = ReadFileToString("/proc/self/setgroups", 64);
  return !s.ok() || s->rfind("deny", 0) != 0;
}

Status SetNonBlocking(int fd) {
  int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) return ErrnoStatus("fcntl", "O_NONBLOCK", errno);
  return Status::Ok();
}

struct Pipe {
  UniqueFd read;
  UniqueFd write;
};

Result<Pipe> MakePipe() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return ErrnoStatus("pipe2", "", errno);
  return Pipe{UniqueFd(fds[0]), UniqueFd(fds[1])};
}

struct Pty {
  UniqueFd master;  // non-blocking, CLOEXEC
  UniqueFd slave;   // CLOEXEC; dup2 in the child makes 0-2 inheritable
};

// A new pty pair of `cols` x `rows` whose slave belongs to `uid` (as login(1) does), so the
// process can reopen its terminal after dropping privileges.
Result<Pty> OpenPty(uint16_t cols, uint16_t rows, uid_t uid, gid_t gid) {
  Pty pty;
  pty.master.reset(::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC | O_NONBLOCK));
  if (!pty.master) return ErrnoStatus("posix_openpt", "/dev/ptmx", errno);
  if (::grantpt(pty.master.get()) != 0) return ErrnoStatus("grantpt", "/dev/ptmx", errno);
  if (::unlockpt(pty.master.get()) != 0) return ErrnoStatus("unlockpt", "/dev/ptmx", errno);
  // TIOCGPTPEER opens the slave through the master, without a path lookup in /dev/pts
  // (Linux 4.13); the path is the fallback.
  int slave = ::ioctl(pty.master.get(), TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (slave < 0) {
    char name[64];
    if (::ptsname_r(pty.master.get(), name, sizeof name) != 0) return ErrnoStatus("ptsname_r", "/dev/ptmx", errno);
    slave = ::open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (slave < 0) return ErrnoStatus("open", name, errno);
  }
  pty.slave.reset(slave);
  if (uid != 0 && ::fchown(pty.slave.get(), uid, gid) != 0) return ErrnoStatus("fchown", "pty slave", errno);
  RETURN_IF_ERROR(SetTtySize(pty.master.get(), cols, rows));
  return pty;
}

Result<UniqueFd> DupCloexec(int fd) {
  UniqueFd out(::fcntl(fd, F_DUPFD_CLOEXEC, 3));
  if (!out) return ErrnoStatus("fcntl", "F_DUPFD_CLOEXEC", errno);
  return out;
}

Status ReportToStatus(const ChildReport& r, const ExecRequest& req, const std::string& cwd) {
  std::string step(r.step, strnlen(r.step, sizeof r.step));
  if (step == "exec") return ErrnoStatus("exec", req.cmd[0], r.err);
  if (step == "chdir") return ErrnoStatus("chdir", cwd, r.err);
  if (step == "setresuid" || step == "setresgid" || step == "setgroups") {
    return ErrnoStatus(step, "user " + req.user, r.err);
  }
  return ErrnoStatus(step, "", r.err);
}

}  // namespace

Status SetTtySize(int pty_fd, uint16_t cols, uint16_t rows) {
  winsize ws{};
  ws.ws_col = cols;
  ws.ws_row = rows;
  if (::ioctl(pty_fd, TIOCSWINSZ, &ws) != 0) return ErrnoStatus("ioctl", "TIOCSWINSZ", errno);
  return Status::Ok();
}

std::vector<std::string> BuildEnvironment(const std::vector<std::string>& inherited, const UserEntry& user,
                                          const std::vector<std::pair<std::string, std::string>>& overrides) {
  std::map<std::string, std::string> env;
  env["PATH"] = kDefaultPath;
  env["TERM"] = "xterm";
  env["LANG"] = "C.UTF-8";
  for (const std::string& kv : inherited) {
    size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  env["HOME"] = user.home.empty() ? "/" : user.home;
  env["USER"] = user.name;
  env["LOGNAME"] = user.name;
  env["SHELL"] = user.shell.empty() ? "/bin/sh" : user.shell;
  for (const auto& [k, v] : overrides) env[k] = v;
  std::vector<std::string> out;
  out.reserve(env.size());
  for (const auto& [k, v] : env) out.push_back(k + "=" + v);
  return out;
}

std::vector<std::string> ExecCandidates(const std::string& cmd, std::string_view path_var) {
  if (cmd.find('/') != std::string::npos) return {cmd};
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    size_t end = path_var.find(':', start);
    std::string_view dir = path_var.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
    std::string candidate = dir.empty() ? std::string(".") : std::string(dir);
    if (candidate.back() != '/') candidate += '/';
    out.push_back(candidate + cmd);
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return out;
}

namespace {

// Forks and runs `plan` in the child; returns its pid once it has exec'd. `report` is the
// pipe whose write end plan.report_fd is.
Result<pid_t> ForkChild(const ChildPlan& plan, Pipe report, const ExecRequest& req, const std::string& cwd) {
  pid_t pid = ::fork();
  if (pid < 0) return ErrnoStatus("fork", req.cmd[0], errno);
  if (pid == 0) RunChild(plan);
  report.write.reset();
  ChildReport r{};
  ssize_t n = RetryEintr([&] { return ::read(report.read.get(), &r, sizeof r); });
  if (n != 0) {
    // The child failed before execve (or the report is garbled); it has _exit'ed or is
    // about to, so reap it here rather than leave a stray exit for the event loop.
    RetryEintr([&] { return ::waitpid(pid, nullptr, 0); });
    if (n == static_cast<ssize_t>(sizeof r)) return ReportToStatus(r, req, cwd);
    return Internal("exec " + req.cmd[0] + ": child setup failed without a report");
  }
  return pid;
}

Result<SpawnedProcess> SpawnOnPty(const ExecRequest& req, const UserEntry& user, ChildPlan plan,
                                  const std::string& cwd) {
  ASSIGN_OR_RETURN(Pty pty, OpenPty(req.cols, req.rows, user.uid, user.gid));
  ASSIGN_OR_RETURN(Pipe report, MakePipe());
  plan.tty = true;
  plan.stdin_fd = plan.stdout_fd = plan.stderr_fd = pty.slave.get();
  plan.report_fd = report.write.get();
  plan.cwd = cwd.c_str();
  ASSIGN_OR_RETURN(pid_t pid, ForkChild(plan, std::move(report), req, cwd));
  // Only the child may hold the slave: the master reads EIO once the session is gone.
  pty.slave.reset();
  SpawnedProcess sp;
  sp.pid = pid;
  ASSIGN_OR_RETURN(sp.stdin_fd, DupCloexec(pty.master.get()));
  ASSIGN_OR_RETURN(sp.pty_fd, DupCloexec(pty.master.get()));
  sp.stdout_fd = std::move(pty.master);
  return sp;
}

}  // namespace

Result<SpawnedProcess> SpawnProcess(const ExecRequest& req, const ExecContext& ctx) {
  ASSIGN_OR_RETURN(UserEntry user, ResolveUser(req.user, ctx.passwd_path));
  ChildPlan plan;
  plan.uid = user.uid;
  plan.gid = user.gid;
  plan.drop_privileges = user.uid != 0;
  plan.drop_sys_admin = !plan.drop_privileges && !ctx.root_keeps_sys_admin;
  if (plan.drop_privileges) {
    ASSIGN_OR_RETURN(plan.groups, SupplementaryGroups(user, ctx.group_path));
    plan.set_groups = SetgroupsAllowed();
    plan.last_cap = ReadLastCap();
  }

  std::vector<std::string> env = BuildEnvironment(ctx.inherited_env, user, req.env);
  std::string path_var(kDefaultPath);
  for (const std::string& kv : env) {
    if (kv.rfind("PATH=", 0) == 0) path_var = kv.substr(5);
  }
  plan.candidates = ExecCandidates(req.cmd[0], path_var);

  std::string cwd = req.cwd.value_or(user.home.empty() ? "/" : user.home);
  plan.cwd = cwd.c_str();
  plan.cwd_fallback_root = !req.cwd.has_value();

  for (const std::string& a : req.cmd) plan.argv.push_back(const_cast<char*>(a.c_str()));
  plan.argv.push_back(nullptr);
  for (const std::string& e : env) plan.envp.push_back(const_cast<char*>(e.c_str()));
  plan.envp.push_back(nullptr);

  if (req.tty) return SpawnOnPty(req, user, std::move(plan), cwd);

  // Without "stdin": true the child gets a pipe whose write end is closed at once: it
  // reads EOF like /dev/null, and the sandbox need not have a /dev/null.
  ASSIGN_OR_RETURN(Pipe in, MakePipe());
  ASSIGN_OR_RETURN(Pipe out, MakePipe());
  ASSIGN_OR_RETURN(Pipe err, MakePipe());
  ASSIGN_OR_RETURN(Pipe report, MakePipe());
  plan.stdin_fd = in.read.get();
  plan.stdout_fd = out.write.get();
  plan.stderr_fd = err.write.get();
  plan.report_fd = report.write.get();
  // O_NONBLOCK is per open file description, so setting it on the parent's ends does not
  // affect the child's; doing it before fork means nothing can fail once the child runs.
  RETURN_IF_ERROR(SetNonBlocking(in.write.get()));
  RETURN_IF_ERROR(SetNonBlocking(out.read.get()));
  RETURN_IF_ERROR(SetNonBlocking(err.read.get()));

  ASSIGN_OR_RETURN(pid_t pid, ForkChild(plan, std::move(report), req, cwd));
  in.read.reset();
  out.write.reset();
  err.write.reset();

  SpawnedProcess sp;
  sp.pid = pid;
  if (req.keep_stdin) sp.stdin_fd = std::move(in.write);
  sp.stdout_fd = std::move(out.read);
  sp.stderr_fd = std::move(err.read);
  return sp;
}

}  // namespace space::guest
