#include "runtime/vm/qemu_command.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace space::runtime::vm {
namespace {

bool Has(const std::vector<std::string>& a, const std::string& flag, const std::string& value) {
  for (size_t i = 0; i + 1 < a.size(); ++i) {
    if (a[i] == flag && a[i + 1] == value) return true;
  }
  return false;
}

int Count(const std::vector<std::string>& a, const std::string& flag) {
  return static_cast<int>(std::count(a.begin(), a.end(), flag));
}

TEST(QemuArgs, MinimalDeviceSetAndContainment) {
  QemuPlan p;
  p.kernel = "/k";
  p.initrd = "/i";
  p.hostname = "sbx-1";
  auto a = QemuArgs(p);
  EXPECT_EQ(a[0], "/usr/bin/qemu-system-x86_64");
  EXPECT_TRUE(Has(a, "-M", "microvm,acpi=on,memory-backend=ram"));
  EXPECT_TRUE(Has(a, "-sandbox", "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny"));
  EXPECT_TRUE(Has(a, "-nic", "none"));
  EXPECT_EQ(Count(a, "-nodefaults"), 1);
  // Exactly four devices: the disk, the serial bus and its one port, the NIC.
  EXPECT_EQ(Count(a, "-device"), 4);
  EXPECT_TRUE(Has(a, "-device", "virtio-blk-device,drive=root"));
  EXPECT_TRUE(Has(a, "-device", "virtio-net-device,netdev=net0,mac=52:54:00:00:00:01"));
  // Without a tap the NIC's frames go nowhere: a hub with no other port.
  EXPECT_EQ(Count(a, "-netdev"), 1);
  EXPECT_TRUE(Has(a, "-netdev", "hubport,id=net0,hubid=0"));
  EXPECT_TRUE(Has(a, "-device", "virtserialport,chardev=channel,name=space.0"));
  EXPECT_TRUE(Has(a, "-accel", "tcg,tb-size=64"));
  EXPECT_EQ(Count(a, "-incoming"), 0);
  // Files only as inherited fds.
  EXPECT_TRUE(Has(a, "-chardev", "socket,id=channel,fd=3"));
  EXPECT_TRUE(Has(a, "-chardev", "socket,id=qmp,fd=4"));
  EXPECT_TRUE(Has(a, "-add-fd", "fd=5,set=1"));
  EXPECT_TRUE(Has(a, "-add-fd", "fd=8,set=1"));
  // The guest's console reaches no host file unless asked for (it could fill the disk).
  EXPECT_TRUE(Has(a, "-chardev", "null,id=console"));
  EXPECT_FALSE(Has(a, "-chardev", "file,id=console,path=/dev/fdset/2"));
  p.console_log = true;
  EXPECT_TRUE(Has(QemuArgs(p), "-chardev", "file,id=console,path=/dev/fdset/2"));
}

TEST(QemuArgs, RamIsTheInheritedFileMappedShared) {
  auto a = QemuArgs(QemuPlan{});
  EXPECT_TRUE(Has(a, "-M", "microvm,acpi=on,memory-backend=ram"));
  EXPECT_EQ(Count(a, "-object"), 1);
  EXPECT_TRUE(Has(a, "-object", "memory-backend-file,id=ram,size=512M,share=on,mem-path=/proc/self/fd/10"));
}

TEST(QemuArgs, RestoreAndKvm) {
  QemuPlan p;
  p.kvm = true;
  p.restore = true;
  p.memory_mb = 256;
  p.cpus = 2;
  auto a = QemuArgs(p);
  // The node starts the incoming migration over QMP, after setting its capabilities.
  EXPECT_TRUE(Has(a, "-incoming", "defer"));
  EXPECT_TRUE(Has(a, "-accel", "kvm"));
  EXPECT_TRUE(Has(a, "-m", "256M"));
  EXPECT_TRUE(Has(a, "-object", "memory-backend-file,id=ram,size=256M,share=on,mem-path=/proc/self/fd/10"));
  EXPECT_TRUE(Has(a, "-smp", "2"));
}

TEST(QemuArgs, TapIsAnInheritedFdWithoutVhost) {
  QemuPlan p;
  p.tap = true;
  p.mac = "52:54:00:ab:cd:ef";
  auto a = QemuArgs(p);
  EXPECT_EQ(Count(a, "-netdev"), 1);
  EXPECT_TRUE(Has(a, "-netdev", "tap,id=net0,vhost=off,fd=9"));
  EXPECT_TRUE(Has(a, "-device", "virtio-net-device,netdev=net0,mac=52:54:00:ab:cd:ef"));
}

}  // namespace
}  // namespace space::runtime::vm
