#include "runtime/vm/qemu_command.h"

namespace space::runtime::vm {

std::vector<std::string> QemuArgs(const QemuPlan& p) {
  std::vector<std::string> a = {p.qemu_binary};
  auto add = [&](std::initializer_list<std::string> args) { a.insert(a.end(), args); };
  add({"-name", "space-vm-" + p.hostname});
  // microvm: virtio-mmio only, no PCI, no firmware; ACPI describes the virtio-mmio devices
  // (Debian's kernel lacks VIRTIO_MMIO_CMDLINE_DEVICES, so acpi=off would hide them).
  // The guest's RAM is a file mapped shared (guest_ram.h), reached by name through its
  // inherited fd: QEMU 7.2 opens a mem-path with open(2), not through fd sets.
  add({"-object", "memory-backend-file,id=ram,size=" + std::to_string(p.memory_mb) +
                      "M,share=on,mem-path=/proc/self/fd/" + std::to_string(kRamFd)});
  add({"-M", "microvm,acpi=on,memory-backend=ram"});
  if (p.kvm) {
    add({"-accel", "kvm", "-cpu", "host"});
  } else {
    // TCG's translation cache defaults to 1 GiB in system mode; a small sandbox needs far less.
    add({"-accel", "tcg,tb-size=64", "-cpu", "max"});
  }
  add({"-m", std::to_string(p.memory_mb) + "M", "-smp", std::to_string(p.cpus)});
  // Nothing QEMU would add by itself: no default devices, no config files, no display, no
  // default network device.
  add({"-nodefaults", "-no-user-config", "-display", "none", "-nic", "none", "-no-reboot"});
  // QEMU's own seccomp filter: no obsolete syscalls, no setuid/setgid, no fork/exec, no
  // scheduler or resource-limit changes.
  add({"-sandbox", "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny"});
  add({"-kernel", p.kernel, "-initrd", p.initrd});
  // The kernel hands SPACE_VM and SPACE_HOSTNAME to init (spaced) as its environment.
  std::string clock = p.tsc_khz > 0 && !p.kvm ? "tsc_early_khz=" + std::to_string(p.tsc_khz) + " tsc=reliable " : "";
  // No init_on_free: the guest's RAM is a file (guest_ram.h), and zeroing every free page at
  // boot would write all of it, where a guest that boots touches a few tens of MiB.
  add({"-append",
       "console=ttyS0 quiet loglevel=1 panic=-1 " + clock + "rdinit=/init SPACE_VM=1 SPACE_HOSTNAME=" + p.hostname});
  // Files come in as inherited fds (fd sets): the VMM's uid cannot open the node's paths.
  add({"-add-fd", "fd=" + std::to_string(kDiskFd) + ",set=1", "-add-fd",
       "fd=" + std::to_string(kDiskReadOnlyFd) + ",set=1", "-add-fd", "fd=" + std::to_string(kConsoleFd) + ",set=2"});
  add({"-drive", "id=root,if=none,format=raw,file=/dev/fdset/1,file.locking=off,cache=writeback,discard=unmap"});
  add({"-device", "virtio-blk-device,drive=root"});
  if (p.console_log) {
    add({"-chardev", "file,id=console,path=/dev/fdset/2", "-serial", "chardev:console"});
  } else {
    add({"-chardev", "null,id=console", "-serial", "chardev:console"});
  }
  add({"-chardev", "socket,id=channel,fd=" + std::to_string(kChannelFd)});
  add({"-device", "virtio-serial-device,max_ports=2"});
  add({"-device", std::string("virtserialport,chardev=channel,name=") + kPortName});
  // The NIC: a tap that the root broker made on the host, configured there as the host end of
  // the sandbox's link (the firewall and the gateway see it exactly as an ns sandbox's veth).
  // No vhost: the VMM opens nothing of the host's.
  add({"-netdev",
       p.tap ? "tap,id=net0,vhost=off,fd=" + std::to_string(kTapFd) : std::string("hubport,id=net0,hubid=0")});
  add({"-device", "virtio-net-device,netdev=net0,mac=" + p.mac});
  add({"-chardev", "socket,id=qmp,fd=" + std::to_string(kQmpFd), "-mon", "chardev=qmp,mode=control"});
  if (p.restore) add({"-incoming", "defer"});
  return a;
}

}  // namespace space::runtime::vm
