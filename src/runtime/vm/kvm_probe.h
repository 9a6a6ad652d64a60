// Whether a VMM may use KVM on this host. The VMM runs as the sandbox's uid, with the KVM
// device's group as its only supplementary group (vm_runtime.cc RunChild), so KVM is usable
// only when that group may read and write the device, is not root's group (joining gid 0
// would hand the VMM root's group on every root-group file), and the kernel makes a VM
// (nested virtualization may be missing even where the device exists). Otherwise the vm
// runtime emulates (TCG), and the reason goes to the log.
#pragma once

#include <sys/types.h>

#include <string>

#include "common/result.h"

namespace space::runtime::vm {

// The group the VMM joins to open `device`; an error saying why KVM is not usable.
Result<gid_t> KvmGroupForVmm(const std::string& device = "/dev/kvm");

}  // namespace space::runtime::vm
