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

// A stand-in device node (1:3 is /dev/null), so each answer is reached in turn from the
// device's owner and mode alone, without touching the host's /dev/kvm. The probe never opens
// the device: the node's uid is not the VMM's.
TEST(KvmProbeTest, AnswersAsTheVmmWouldFromOwnerAndMode) {
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
  // Debian's root:kvm 0660: the VMM joins the group (the node need not be in it).
  ASSERT_EQ(::chmod(dev.c_str(), 0660), 0);
  r = KvmGroupForVmm(dev);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, 65534u);
  // Open to all: no group needed, so root's group is no obstacle.
  ASSERT_EQ(::chown(dev.c_str(), 0, 0), 0);
  ASSERT_EQ(::chmod(dev.c_str(), 0666), 0);
  r = KvmGroupForVmm(dev);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, 0u);
  const std::string file = std::string(tmpl) + "/file";
  ASSERT_EQ(std::system(("touch " + file).c_str()), 0);
  EXPECT_FALSE(KvmGroupForVmm(file).ok());
  ASSERT_EQ(std::system((std::string("rm -rf ") + tmpl).c_str()), 0);
}

TEST(KvmProbeTest, ParsesTheAccelFlag) {
  EXPECT_EQ(*ParseAccel("auto"), Accel::kAuto);
  EXPECT_EQ(*ParseAccel("kvm"), Accel::kKvm);
  EXPECT_EQ(*ParseAccel("tcg"), Accel::kTcg);
  EXPECT_EQ(ParseAccel("KVM").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseAccel("").status().code(), StatusCode::kInvalidArgument);
  EXPECT_STREQ(AccelName(Accel::kTcg), "tcg");
}

}  // namespace
}  // namespace space::runtime::vm
