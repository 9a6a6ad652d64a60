#include "runtime/vm/kvm_probe.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

namespace space::runtime::vm {
namespace {

TEST(KvmProbeTest, NoDeviceIsNotFound) {
  EXPECT_EQ(KvmGroupForVmm("/nonexistent/kvm").status().code(), StatusCode::kNotFound);
}

// A stand-in device node (1:3 is /dev/null: a character device that is not KVM), so each
// refusal is reached in turn without touching the host's /dev/kvm.
TEST(KvmProbeTest, RefusesWhatTheVmmCouldNotOpenOrWhatIsNotKvm) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (mknod)";
  char tmpl[] = "/tmp/kvm_probe_test.XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dev = std::string(tmpl) + "/kvm";
  ASSERT_EQ(::mknod(dev.c_str(), S_IFCHR | 0600, ::makedev(1, 3)), 0);
  ASSERT_EQ(::chown(dev.c_str(), 0, 0), 0);
  auto r = KvmGroupForVmm(dev);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("group root"), std::string::npos) << r.status().ToString();
  ASSERT_EQ(::chown(dev.c_str(), 0, 65534), 0);
  ASSERT_EQ(::chmod(dev.c_str(), 0600), 0);
  r = KvmGroupForVmm(dev);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("read-write for its group"), std::string::npos) << r.status().ToString();
  ASSERT_EQ(::chmod(dev.c_str(), 0660), 0);
  r = KvmGroupForVmm(dev);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("KVM API"), std::string::npos) << r.status().ToString();
  // Open to all: no group needed, so root's group is no obstacle; still not KVM.
  ASSERT_EQ(::chown(dev.c_str(), 0, 0), 0);
  ASSERT_EQ(::chmod(dev.c_str(), 0666), 0);
  r = KvmGroupForVmm(dev);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("KVM API"), std::string::npos) << r.status().ToString();
  const std::string file = std::string(tmpl) + "/file";
  ASSERT_EQ(std::system(("touch " + file).c_str()), 0);
  EXPECT_FALSE(KvmGroupForVmm(file).ok());
  ASSERT_EQ(std::system((std::string("rm -rf ") + tmpl).c_str()), 0);
}

// The host's own device, whatever it is: usable means open to all or through a group other
// than root's, and a VM made.
TEST(KvmProbeTest, TheHostsDeviceIsUsableOnlyOpenToAllOrThroughAGroupThatIsNotRoots) {
  struct stat st;
  if (::stat("/dev/kvm", &st) != 0) GTEST_SKIP() << "no /dev/kvm";
  auto r = KvmGroupForVmm();
  const bool open_to_all = (st.st_mode & 006) == 006;
  if (!open_to_all && (st.st_gid == 0 || (st.st_mode & 060) != 060)) {
    EXPECT_FALSE(r.ok());
  }
  if (r.ok()) {
    EXPECT_EQ(*r, open_to_all ? 0u : st.st_gid);
  }
}

}  // namespace
}  // namespace space::runtime::vm
