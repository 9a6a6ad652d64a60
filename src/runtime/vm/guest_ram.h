// The guest's RAM as a file in its state dir (kVmRamName), which QEMU maps shared
// (memory-backend-file,share=on). Its checkpoints then carry device state only (the
// x-ignore-shared migration capability skips shared RAM), and a restore maps a reflink of
// the saved file instead of reading every page through the migration stream: O(1) on btrfs,
// and pages are read in as the guest touches them.
#pragma once

#include <sys/types.h>

#include <cstdint>

#include "common/result.h"
#include "common/unique_fd.h"

namespace space::runtime::vm {

// Opens `name` beneath `state_dir` read-write for a VMM running as `vmm_uid`. `keep`: the file
// holds the RAM a restore maps, and must already be exactly `bytes` long; otherwise any old
// file is replaced by a new sparse one of `bytes`. QEMU 7.2 opens its mem-path by name (no fd
// sets), so the VMM reopens this fd through /proc/self/fd: the file gets a POSIX ACL entry
// giving that one uid read-write (the node owns the file and cannot chown it).
Result<UniqueFd> OpenGuestRam(int state_dir, const char* name, uint64_t bytes, bool keep, uid_t vmm_uid);

}  // namespace space::runtime::vm
