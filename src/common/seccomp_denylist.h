// A default-allow seccomp filter built from lists of what to refuse: for SPACE's own helper
// processes (the gateway worker, the root broker), which run known code and need a narrow
// fence, not a whitelist that breaks as libraries change. (Sandboxes have their own filter,
// runtime/ns/seccomp.h.) Separate library: it links libseccomp, which the static guest does not.
#pragma once

#include <cstdint>
#include <vector>

#include "common/result.h"

namespace space {

struct DenyList {
  std::vector<const char*> syscalls;  // refused with EPERM (names unknown on this arch skipped)
  std::vector<int> socket_families;   // socket(family, ...) refused with EAFNOSUPPORT
  // clone with any CLONE_NEW* flag refused with EPERM; clone3, whose flags seccomp cannot
  // read, with ENOSYS (glibc then falls back to clone).
  bool no_new_namespaces = true;
  // kill, tgkill, rt_sigqueueinfo, rt_tgsigqueueinfo to any pid but the caller's: EPERM.
  bool signals_only_to_self = true;
  // Refused with EPERM when argument `arg` of `syscall` differs from `value`.
  struct ArgMustEqual {
    const char* syscall;
    unsigned arg;
    uint64_t value;
  };
  std::vector<ArgMustEqual> arg_must_equal;
};

// Large kernel surfaces and host-wide administration that no SPACE process and nothing a
// sandbox may run uses: modules, kexec, bpf, perf, userfaultfd, keyrings, file handles,
// io_uring, swap, accounting, quotas, the kernel log, the clock, port I/O. Every sandbox
// refuses them too (runtime/ns/seccomp.cc), so the node's own filter, which is this list and
// which its children inherit, changes nothing for them.
std::vector<const char*> KernelSurfaceSyscalls();

// KernelSurfaceSyscalls plus what no SPACE helper process (the gateway worker, the API front)
// or the libraries it uses calls, each a way out of the helper: exec, tracing, mounts and
// namespaces, pidfds, tkill.
std::vector<const char*> HelperRefusedSyscalls();

// Loads the filter for every thread of the calling process (TSYNC); a foreign architecture's
// syscall kills the process. Requires no_new_privs or CAP_SYS_ADMIN.
Status LoadDenyList(const DenyList& list);

}  // namespace space
