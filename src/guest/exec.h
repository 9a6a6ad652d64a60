// Process spawning for kExecStart: user resolution, environment, fork/exec with the
// privilege drop, and the child's failure report.
//
// SpawnProcess forks; the caller must be single-threaded (spaced is), so the child may
// use anything prepared before fork. Everything the child needs (argv, envp, candidate
// paths, groups) is built in the parent; the child only makes syscalls. A failure in the
// child before execve is sent back as {step, errno} over a CLOEXEC pipe and becomes the
// returned Status. Stateless.
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/result.h"
#include "common/unique_fd.h"
#include "guest/passwd.h"
#include "protocol/exec_request.h"

namespace space::guest {

inline constexpr std::string_view kDefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

// Where spawned processes come from: the sandbox's account files and spaced's own
// environment (the node passes sandbox-wide variables there).
struct ExecContext {
  std::string passwd_path = "/etc/passwd";
  std::string group_path = "/etc/group";
  std::vector<std::string> inherited_env;  // "K=V" entries
  // PID 1 of a microVM: it owns the VM's network and configures its NIC when the node says
  // (kNetConfig). Elsewhere (an ns sandbox) the node configures the network from outside.
  bool configures_network = false;
  // Whether the sandbox's root keeps CAP_SYS_ADMIN: a microVM's root owns its kernel (mounts,
  // its hostname). Elsewhere (an ns sandbox, sharing the host's kernel) root has no
  // CAP_SYS_ADMIN, so no filesystem of any type can be mounted, each one a kernel attack
  // surface of its own (docs/security.md, "Mounts").
  bool root_keeps_sys_admin = false;
};

// A started process. The parent ends of its pipes are non-blocking and CLOEXEC; stdin_fd
// is invalid when the request did not keep stdin. The process leads its own session and
// process group (pgid == pid).
//
// With a tty, stdout_fd, stdin_fd and pty_fd are three descriptors of the pty master (each
// registered or closed on its own by the event loop), stderr_fd is invalid, and the slave
// is the child's controlling terminal and fds 0-2. Reading the master gives EIO, not EOF,
// once every slave fd is closed.
struct SpawnedProcess {
  pid_t pid = -1;
  UniqueFd stdin_fd;
  UniqueFd stdout_fd;
  UniqueFd stderr_fd;
  UniqueFd pty_fd;  // tty only: for TIOCSWINSZ
};

// Sets a pty's window size (on the master or the slave); the kernel sends SIGWINCH to the
// terminal's foreground process group.
Status SetTtySize(int pty_fd, uint16_t cols, uint16_t rows);

// Final environment, later sources winning: PATH/TERM/LANG defaults, then spaced's own
// environment, then the user's identity (HOME, USER, LOGNAME, SHELL, which must describe
// the user actually run), then the request's env. Sorted by name.
std::vector<std::string> BuildEnvironment(const std::vector<std::string>& inherited, const UserEntry& user,
                                          const std::vector<std::pair<std::string, std::string>>& overrides);

// Paths execve is tried on, as execvp does: `cmd` itself when it contains '/', else each
// PATH entry joined with it (an empty entry means the current directory).
std::vector<std::string> ExecCandidates(const std::string& cmd, std::string_view path_var);

// Resolves the user, forks, sets the child up and execs it. Returns once the child has
// exec'd (or failed to: kNotFound for a missing binary or cwd, kPermissionDenied for
// EACCES, ...).
Result<SpawnedProcess> SpawnProcess(const ExecRequest& req, const ExecContext& ctx);

}  // namespace space::guest
