// The QEMU command line of one microVM, built from a validated plan. Pure: no I/O, so the
// device set (and with it the VMM's attack surface) is pinned by qemu_command_test.cc.
#pragma once

#include <string>
#include <vector>

namespace space::runtime::vm {

// Inherited fd numbers, fixed in the VMM process (the launcher dup2s onto them).
inline constexpr int kChannelFd = 3;   // node end <-> virtserialport (guest protocol)
inline constexpr int kQmpFd = 4;       // QMP monitor
inline constexpr int kDiskFd = 5;      // the sandbox's disk image, read-write
inline constexpr int kConsoleFd = 6;   // serial console log, write-only
inline constexpr int kIncomingFd = 7;  // memory and device state to restore (optional)
inline constexpr int kDiskReadOnlyFd = 8;  // the same disk image, read-only: QEMU probes it so
inline constexpr int kTapFd = 9;           // the host tap of the guest's NIC (optional)
inline constexpr int kRamFd = 10;          // the guest's RAM file (guest_ram.h), read-write
inline constexpr int kInheritedFds = 8;    // kChannelFd .. kRamFd
// The virtserialport's name; spaced looks it up in /sys/class/virtio-ports.
inline constexpr char kPortName[] = "space.0";

struct QemuPlan {
  std::string qemu_binary = "/usr/bin/qemu-system-x86_64";
  bool kvm = false;          // /dev/kvm usable; otherwise TCG emulation
  std::string kernel;        // host path, world-readable (the VMM runs unprivileged)
  std::string initrd;
  std::string hostname;      // passed on the kernel command line; [A-Za-z0-9._-]
  int memory_mb = 512;
  int cpus = 1;
  // Restore from kIncomingFd: QEMU waits for migrate-incoming (the node sets the migration
  // capabilities the stream was saved with first). `restore_ram_file`: the stream is device
  // state only and the RAM file (kRamFd, guest_ram.h) holds the saved RAM; otherwise the
  // stream carries the RAM and the file starts empty.
  bool restore = false;
  bool restore_ram_file = false;
  // The guest's one NIC (virtio-net): its frames go to the host tap at kTapFd, or, without
  // one, to a hub port with nothing else on it (the device set, and so a checkpoint's, is the
  // same either way). `mac`: "52:54:00:xx:xx:xx".
  bool tap = false;
  std::string mac = "52:54:00:00:00:01";
  // The host's TSC rate. Under TCG the guest's TSC is the host's, but this kernel has no
  // reference clock to measure it against on microvm (no PIT/HPET with ACPI on) and hangs
  // calibrating its timers; told the rate (tsc_early_khz), it boots. 0: not passed.
  int64_t tsc_khz = 0;
  // The guest's serial console goes to the console log (kConsoleFd) only when asked for
  // (SPACE_VM_CONSOLE_LOG=1, for debugging boots): the guest writes it at will, and a host
  // file it can grow without bound is a disk-filling hole. Otherwise a null chardev; QEMU's
  // own stderr still goes to the log.
  bool console_log = false;
};

std::vector<std::string> QemuArgs(const QemuPlan& plan);

}  // namespace space::runtime::vm
