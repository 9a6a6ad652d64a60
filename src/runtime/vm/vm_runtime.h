// The `vm` runtime (runtime.h): each sandbox is a QEMU microVM with its own guest kernel,
// spaced as its PID 1, its root an ext4 disk image kept in the sandbox's root directory on
// the pool (<root>/.space-vm/disk.img), so the pool's snapshots, exports and clones carry it.
//
// Containment of the VMM: QEMU runs as the sandbox's unprivileged host uid (its uid range
// base), in new network, IPC, UTS and mount namespaces, in a per-sandbox cgroup holding the
// memory/cpu/pids limits, with no_new_privs and QEMU's own seccomp sandbox, as pid 2 of a PID
// namespace whose pid 1 is the VMM reaper (vmm_reaper.h: it dies with the node, and QEMU with
// it); its only devices are a virtio-blk disk, one
// virtio-serial port (the guest channel) and a serial console. Files reach it as inherited
// fds. See qemu_command.h for the command line.
//
// Owned by the node; one per node. Thread-safe.
#pragma once

#include <functional>
#include <memory>

#include "common/result.h"
#include "common/unique_fd.h"
#include "runtime/runtime.h"

namespace space::runtime {

// Inside kVmStateDir (runtime.h): the disk and the checkpoint.
inline constexpr char kVmDiskName[] = "disk.img";
inline constexpr char kVmMemoryName[] = "memory.state";
// The guest's RAM, mapped shared by QEMU (guest_ram.h): a checkpoint's memory.state is then
// device state only, and the RAM is this file as it was at the checkpoint (the pool's
// snapshot of the root takes both at one instant).
inline constexpr char kVmRamName[] = "memory.ram";
// Where a checkpoint's memory state is written until QEMU reports it complete.
inline constexpr char kVmMemoryTmpName[] = "memory.state.tmp";

// <rootfs>/.space-vm as a directory fd, reached with openat2(RESOLVE_BENEATH |
// RESOLVE_NO_SYMLINKS): a sandbox root (an imported template, a restored snapshot) is not
// trusted. Created 0700 when missing and `create`: by `acts` when set (a node that does not own
// the roots, not being uid 0, has its root broker make it and give it to the node:
// vm_state_dir), here otherwise.
Result<UniqueFd> OpenVmStateDir(const std::string& rootfs, bool create, PrivilegedActs* acts = nullptr);
// Opens `name` in a state dir fd, refusing symlinks and anything but a regular file (a
// device node must never reach QEMU). Not for O_CREAT.
Result<UniqueFd> OpenVmStateFile(int state_dir, const std::string& name, int flags);
// Whether <rootfs>/.space-vm/<name> is a regular file (a symlink or other type is an error).
Result<bool> HasVmStateFile(const std::string& rootfs, const std::string& name);

// Creates the runtime: probes cgroups and /dev/kvm; guest assets are prepared on first use.
// Kernel and initramfs are cached host-wide in config.vm_cache_dir; template disk images and
// template checkpoints in `image_dir`, which must be on the pool's filesystem so sandbox
// disks can be reflinks of them.
Result<std::unique_ptr<Runtime>> CreateVmRuntime(const RuntimeConfig& config, const std::string& image_dir);

}  // namespace space::runtime
