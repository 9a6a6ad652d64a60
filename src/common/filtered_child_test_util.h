// For tests of SPACE's seccomp filters and privilege drops: runs checks in a forked child
// after it applied a restriction, so the test process itself stays unrestricted.
#pragma once

#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>

#include "common/result.h"

namespace space::testing {

// Forks; the child runs `restrict` (exit 91 when it fails), with no_new_privs set first when
// `no_new_privs` (exit 90 when that fails), then `body`, whose return value is its exit code
// (0: every numbered check held). Returns that exit code, or -1 when the child did not exit.
inline int InRestrictedChild(const std::function<Status()>& restrict, const std::function<int()>& body,
                             bool no_new_privs = true) {
  pid_t pid = ::fork();
  if (pid == 0) {
    if (no_new_privs && ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) ::_exit(90);
    if (!restrict().ok()) ::_exit(91);
    ::_exit(body());
  }
  int status = 0;
  if (pid < 0 || ::waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

}  // namespace space::testing
