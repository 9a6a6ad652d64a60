// spaced's first job as PID 1 of a microVM (the `vm` runtime): turn the initramfs it was
// started from into the sandbox's root. It loads the virtio modules packed beside it, mounts
// the virtio-blk disk as the new root, switches into it and opens the virtio-serial port
// that carries the guest protocol, as fd kChannelFd. Afterwards spaced serves exactly as in
// an `ns` sandbox.
//
// Called once, single-threaded, before anything else in main.
#pragma once

#include "common/status.h"

namespace space::guest {

// The kernel command line carries SPACE_VM=1 (the kernel hands unknown `K=V` words to init
// as environment); only then is spaced in an initramfs.
bool StartedInVm();

// Runs the steps above. Errors name the step; the caller logs them to the console and ends
// (PID 1 exiting powers the VM off: the VMM runs with -no-reboot).
Status BootFromInitramfs();

}  // namespace space::guest
