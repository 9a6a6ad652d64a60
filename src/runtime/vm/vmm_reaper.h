// The VMM reaper: pid 1 of a VMM's PID namespace, with QEMU its only child. It ends QEMU when
// the node dies, which PR_SET_PDEATHSIG cannot do once the node holds no CAP_KILL: the kernel
// sends that signal with the dying parent's credentials, and QEMU runs under the sandbox's
// uid. The reaper needs no signal at all: it holds the read end of a pipe whose write end only
// the node keeps, and exits when that end closes; when pid 1 of a PID namespace exits, the
// kernel kills every other process in it. It also exits when QEMU does, with QEMU's status,
// so the node's pidfd of its VMM child keeps meaning "QEMU is gone".
//
// `space vmm-reaper --alive-fd N --qemu-pid P`, exec'd by the VMM's launcher (vm_runtime.cc
// RunChild) after it forked QEMU, as the sandbox's uid with no capability and no_new_privs.
#pragma once

#include <sys/types.h>

namespace space::runtime::vm {

// Where the launcher puts the pipe's read end in the reaper (not close-on-exec).
inline constexpr int kReaperAliveFd = 3;

// Runs until the node is gone (0) or QEMU exits (its exit code, or 128 + its signal).
// Refuses (2) unless it is pid 1 with `qemu_pid` its child.
int RunVmmReaper(int alive_fd, pid_t qemu_pid);

}  // namespace space::runtime::vm
