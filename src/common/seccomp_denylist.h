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

// What no SPACE helper process (the gateway worker, the API front) or the libraries it uses
// calls: each is a way out of the helper (exec, namespaces, mounts, tracing) or a large kernel
// surface (modules, bpf, io_uring, keyrings, ...).
std::vector<const char*> HelperRefusedSyscalls();

// Loads the filter for every thread of the calling process (TSYNC); a foreign architecture's
// syscall kills the process. Requires no_new_privs or CAP_SYS_ADMIN.
Status LoadDenyList(const DenyList& list);

}  // namespace space
