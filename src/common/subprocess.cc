#include "common/subprocess.h"

#include <fcntl.h>
#include <linux/close_range.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <deque>

#include "common/syscall.h"

namespace space {
namespace {

constexpr size_t kTailLines = 12;
constexpr size_t kMaxLineBytes = 4096;

std::vector<char*> CStrings(std::vector<std::string>& v) {
  std::vector<char*> out;
  out.reserve(v.size() + 1);
  for (auto& s : v) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// Child side: everything here must be async-signal-safe (the parent may be multithreaded).
[[noreturn]] void ExecChild(int in_fd, int stdout_fd, int cwd_fd, int out_fd, int err_report_fd,
                            char* const* argv, char* const* envp) {
  if (in_fd < 0) in_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (stdout_fd < 0) stdout_fd = out_fd;
  if (in_fd < 0 || ::dup2(in_fd, 0) < 0 || ::dup2(stdout_fd, 1) < 0 || ::dup2(out_fd, 2) < 0 ||
      (cwd_fd >= 0 && ::fchdir(cwd_fd) != 0)) {
    int e = errno;
    (void)!::write(err_report_fd, &e, sizeof e);
    ::_exit(127);
  }
  // Undo what the node may have set for itself: blocked signals and ignored SIGPIPE are
  // inherited across exec and would change how the helper behaves.
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  // Nothing else the node holds (sockets opened without CLOEXEC included) reaches the tool;
  // the error report pipe stays usable until execve succeeds.
  (void)::syscall(SYS_close_range, 3, ~0U, CLOSE_RANGE_CLOEXEC);
  struct sigaction dfl = {};
  dfl.sa_handler = SIG_DFL;
  sigaction(SIGPIPE, &dfl, nullptr);
  ::execve(argv[0], argv, envp);
  int e = errno;
  (void)!::write(err_report_fd, &e, sizeof e);
  ::_exit(127);
}

}  // namespace

std::vector<std::string> ToolEnvironment(const std::vector<std::string>& extra) {
  std::vector<std::string> env = {
      "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
      "LC_ALL=C",
      "DEBIAN_FRONTEND=noninteractive",
  };
  // Package mirrors are often reachable only through the host's proxy.
  for (const char* name : {"http_proxy", "https_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY"}) {
    if (const char* v = std::getenv(name)) env.push_back(std::string(name) + "=" + v);
  }
  env.insert(env.end(), extra.begin(), extra.end());
  return env;
}

Status RunProcess(const SubprocessSpec& spec, const LineFn& on_line) {
  if (spec.argv.empty() || spec.argv[0].empty() || spec.argv[0][0] != '/') {
    return InvalidArgument("run: argv[0] must be an absolute path");
  }
  std::vector<std::string> argv_s = spec.argv;
  std::vector<std::string> env_s = ToolEnvironment(spec.env);
  std::vector<char*> argv = CStrings(argv_s);
  std::vector<char*> envp = CStrings(env_s);
  const std::string& prog = spec.argv[0];

  int out[2], rep[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return ErrnoStatus("pipe2", prog, errno);
  UniqueFd out_r(out[0]), out_w(out[1]);
  if (::pipe2(rep, O_CLOEXEC) != 0) return ErrnoStatus("pipe2", prog, errno);
  UniqueFd rep_r(rep[0]), rep_w(rep[1]);

  pid_t pid = ::fork();
  if (pid < 0) return ErrnoStatus("fork", prog, errno);
  // dup2 clears CLOEXEC on the child's 0/1/2, so the pipe's write end survives exec only there.
  if (pid == 0) {
    ExecChild(spec.stdin_fd, spec.stdout_fd, spec.cwd_fd, out_w.get(), rep_w.get(), argv.data(), envp.data());
  }
  out_w.reset();
  rep_w.reset();

  int exec_err = 0;
  Status st = CollectOutput(out_r.get(), pid, prog, on_line);
  if (RetryEintr([&] { return ::read(rep_r.get(), &exec_err, sizeof exec_err); }) ==
      static_cast<ssize_t>(sizeof exec_err)) {
    return ErrnoStatus("exec", prog, exec_err);
  }
  return st;
}

Status CollectOutput(int out_fd, pid_t pid, const std::string& prog, const LineFn& on_line) {
  std::deque<std::string> tail;
  std::string partial;
  auto emit = [&](std::string line) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (on_line) on_line(line);
    tail.push_back(std::move(line));
    if (tail.size() > kTailLines) tail.pop_front();
  };
  char buf[8192];
  for (;;) {
    ssize_t n = RetryEintr([&] { return ::read(out_fd, buf, sizeof buf); });
    if (n < 0) break;  // Still reap the child below; the read error is not worth more.
    if (n == 0) break;
    for (ssize_t i = 0; i < n; ++i) {
      if (buf[i] == '\n' || partial.size() >= kMaxLineBytes) {
        emit(std::move(partial));
        partial.clear();
        if (buf[i] == '\n') continue;
      }
      partial.push_back(buf[i]);
    }
  }
  if (!partial.empty()) emit(std::move(partial));

  int status = 0;
  if (RetryEintr([&] { return ::waitpid(pid, &status, 0); }) < 0) return ErrnoStatus("waitpid", prog, errno);

  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return Status::Ok();

  std::string why = WIFEXITED(status) ? "exit status " + std::to_string(WEXITSTATUS(status))
                                      : "killed by signal " + std::to_string(WTERMSIG(status));
  std::string msg = prog + " failed with " + why;
  if (!tail.empty()) {
    msg += "; last output:";
    for (const auto& l : tail) msg += "\n  " + l;
  }
  return Internal(msg);
}

}  // namespace space
