// Runs a helper program (mkfs.btrfs, debootstrap, tar, cp) to completion without a shell,
// streaming its combined stdout/stderr to a callback one line at a time.
// Stateless and thread-safe; fork() in the child is followed only by async-signal-safe calls.
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

#include "common/status.h"

namespace space {

struct SubprocessSpec {
  std::vector<std::string> argv;  // argv[0] is an absolute path; no PATH search.
  // Extra "KEY=value" entries on top of a minimal fixed environment (PATH, LC_ALL=C) plus the
  // host's proxy variables, so a helper behaves the same however the node was started.
  std::vector<std::string> env;
  // The program's stdin and stdout, when not /dev/null and the line collector: for a tar that
  // reads a tarball or writes into a pipe. Descriptors >= 3, left open for the caller.
  int stdin_fd = -1;
  int stdout_fd = -1;
  // The directory the program starts in (fchdir), when not this process's: for a tar that
  // reads a directory this process opened itself.
  int cwd_fd = -1;
};

using LineFn = std::function<void(const std::string& line)>;

// Runs the program and waits for it. OK only on exit status 0; otherwise the error names the
// program, the exit status or signal, and the last lines it printed.
Status RunProcess(const SubprocessSpec& spec, const LineFn& on_line);

// The environment RunProcess gives a program: the fixed entries, the host's proxy variables,
// then `extra`.
std::vector<std::string> ToolEnvironment(const std::vector<std::string>& extra);

// Reads `out_fd` line by line to `on_line` until EOF, then reaps child `pid`. The same verdict
// as RunProcess, naming `prog`. For programs started another way (node/build_jail.h).
Status CollectOutput(int out_fd, pid_t pid, const std::string& prog, const LineFn& on_line);

}  // namespace space
