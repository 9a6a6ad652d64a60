// openat2 beneath a directory fd for the vm runtime's state dir (<root>/.space-vm), whose
// contents the sandbox's root may have planted: never leaves `dir`, never follows a symlink
// (magic links included).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "common/result.h"
#include "common/unique_fd.h"

namespace space::runtime::vm {

// `flags` gets O_CLOEXEC; `mode` applies with O_CREAT only. A symlink on the way is
// kInvalidArgument naming `what`.
Result<UniqueFd> OpenBeneath(int dir, const std::string& name, uint64_t flags, const std::string& what,
                             mode_t mode = 0600);

}  // namespace space::runtime::vm
