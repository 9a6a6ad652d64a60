// The sandbox's seccomp-bpf filter: built once (libseccomp) when the runtime is created,
// loaded by each sandbox's first process right before exec.
#pragma once

#include <linux/filter.h>

#include <vector>

#include "common/result.h"

namespace space::runtime::ns {

// Compiles the filter (default allow, explicit refusals; non-native ABIs kill the
// process) to classic BPF.
Result<std::vector<sock_filter>> BuildSeccompFilter();

// Child side, async-signal-safe: loads `prog` for the calling thread. Requires
// no_new_privs (or CAP_SYS_ADMIN). Returns 0 or an errno.
int ChildLoadSeccomp(const sock_fprog* prog);

}  // namespace space::runtime::ns
