// The node's own seccomp filter, loaded by `space dev` / `space node` once the root broker is
// forked. The node keeps CAP_SYS_ADMIN (launch, mounts, cgroups, btrfs) until those acts move
// into the broker, and with it the older capability checks of BPF, perf and file handles: this
// filter takes those away, with the other kernel surfaces nothing of SPACE uses
// (KernelSurfaceSyscalls). A compromised node cannot load BPF programs, open perf events (with
// which it could read the broker's memory), use io_uring or userfaultfd, touch kernel keyrings,
// or open host files by handle. Everything the node runs inherits the filter: sandboxes refuse
// the same calls themselves (runtime/ns/seccomp.cc), template builds and QEMU use none of them.
#pragma once

#include "common/result.h"

namespace space::node {

// For every thread of the calling process (TSYNC). Needs CAP_SYS_ADMIN or no_new_privs.
Status LoadNodeSeccomp();

}  // namespace space::node
