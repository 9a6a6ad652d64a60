// spaced's first job as PID 1 of a microVM (the `vm` runtime): turn the initramfs it was
// started from into the sandbox's root. It loads the virtio modules packed beside it, mounts
// the virtio-blk disk as the new root, switches into it and opens the virtio-serial port
// that carries the guest protocol, as fd kChannelFd. Afterwards spaced serves exactly as in
// an `ns` sandbox.
//
// Called once, single-threaded, before anything else in main.
#pragma once

#include <string_view>

#include "common/status.h"

namespace space::guest {

// The kernel command line carries SPACE_VM=1 (the kernel hands unknown `K=V` words to init
// as environment); only then is spaced in an initramfs.
bool StartedInVm();

// Runs the steps above. Errors name the step; the caller logs them to the console and ends
// (PID 1 exiting powers the VM off: the VMM runs with -no-reboot).
Status BootFromInitramfs();

// Mixes `entropy` (host randomness from a kReseed frame) into the kernel's pool with
// RNDADDENTROPY, credited, and forces a CRNG reseed with RNDRESEEDCRNG, so a guest restored
// from a checkpoint other guests share stops producing the same random numbers as they do.
// Needs CAP_SYS_ADMIN (spaced is root in the VM). Valid any time after boot.
Status MixHostEntropy(std::string_view entropy);

}  // namespace space::guest
