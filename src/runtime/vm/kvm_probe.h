// Whether a VMM may use KVM on this host. The VMM runs as the sandbox's uid, so KVM is usable
// only when that uid may open the device: through its "other" bits (0666), or by joining the
// device's group (vm_runtime.cc RunChild), which must then be read-write and not root's
// (joining gid 0 would hand the VMM root's group on every root-group file); and only when the
// kernel makes a VM (nested virtualization may be missing even where the device exists).
// Otherwise the vm runtime emulates (TCG), and the reason goes to the log.
#pragma once

#include <sys/types.h>

#include <string>

#include "common/result.h"

namespace space::runtime::vm {

// The group the VMM joins to open `device` (0: none needed, the device is open to all); an
// error saying why KVM is not usable.
Result<gid_t> KvmGroupForVmm(const std::string& device = "/dev/kvm");

}  // namespace space::runtime::vm
