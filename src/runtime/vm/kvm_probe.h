// Which accelerator a VMM runs with, and whether KVM is worth trying. The VMM runs as the
// sandbox's uid, not the node's, so the node never opens /dev/kvm itself (on Debian's
// root:kvm 0660 it could not, though the VMM may): it reads the device's owner and mode and
// asks whether that uid could open it, through the "other" bits (0666) or by joining the
// device's group (vm_runtime.cc RunChild), which must then be read-write and not root's
// (joining gid 0 would hand the VMM root's group on every root-group file). Whether KVM
// actually runs this guest (nested virtualization may be missing; a PVM host runs a guest
// kernel without PVM support in its instruction emulator) is proven by booting it once
// (vm_runtime.cc ProveKvm); otherwise the vm runtime emulates (TCG), and the log says why.
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>

#include "common/result.h"

namespace space::runtime::vm {

// `space dev --accel`: auto (KVM when the device looks usable and a guest boots under it,
// TCG otherwise), kvm (try KVM whatever the device's mode says; still TCG if the guest does
// not boot: a create never fails for the accelerator), tcg (never KVM).
enum class Accel { kAuto, kKvm, kTcg };

Result<Accel> ParseAccel(std::string_view text);
const char* AccelName(Accel accel);

// The group the VMM joins to open `device` (0: none needed, the device is open to all); an
// error saying why the VMM could not open it (kNotFound: no such device). From stat alone.
Result<gid_t> KvmGroupForVmm(const std::string& device = "/dev/kvm");

}  // namespace space::runtime::vm
