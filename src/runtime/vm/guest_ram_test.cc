#include "runtime/vm/guest_ram.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

namespace space::runtime::vm {
namespace {

constexpr uid_t kVmmUid = 4242420;

class GuestRamTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/guest-ram-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    path_ = tmpl;
    dir_.reset(::open(tmpl, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    ASSERT_TRUE(dir_.valid());
  }
  void TearDown() override {
    for (const char* n : {"ram", "other", "link"}) ::unlinkat(dir_.get(), n, 0);
    ::rmdir(path_.c_str());
  }
  // Whether `uid` can reopen `fd` read-write through /proc/self/fd, as the VMM does.
  static bool ReopenableAs(uid_t uid, int fd) {
    pid_t pid = ::fork();
    if (pid == 0) {
      if (::setresgid(uid, uid, uid) != 0 || ::setresuid(uid, uid, uid) != 0) ::_exit(2);
      int r = ::open(("/proc/self/fd/" + std::to_string(fd)).c_str(), O_RDWR);
      ::_exit(r >= 0 ? 0 : 1);
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  std::string path_;
  UniqueFd dir_;
};

TEST_F(GuestRamTest, NewFileIsSparseOfTheGuestSizeWithAnAclForTheVmm) {
  auto fd = OpenGuestRam(dir_.get(), "ram", 64 << 20, false, kVmmUid);
  ASSERT_TRUE(fd.ok()) << fd.status().ToString();
  struct stat sb;
  ASSERT_EQ(::fstat(fd->get(), &sb), 0);
  EXPECT_EQ(sb.st_size, 64 << 20);
  EXPECT_LT(sb.st_blocks * 512, 1 << 20);  // sparse
  // Header and five entries.
  EXPECT_EQ(::fgetxattr(fd->get(), "system.posix_acl_access", nullptr, 0), 4 + 5 * 8);
}

TEST_F(GuestRamTest, OnlyTheNamedUidReopensItReadWrite) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to take another uid";
  auto fd = OpenGuestRam(dir_.get(), "ram", 1 << 20, false, kVmmUid);
  ASSERT_TRUE(fd.ok()) << fd.status().ToString();
  EXPECT_TRUE(ReopenableAs(kVmmUid, fd->get()));
  EXPECT_FALSE(ReopenableAs(kVmmUid + 1, fd->get()));
  // Positive control: without the ACL entry the same uid cannot.
  UniqueFd plain(::openat(dir_.get(), "other", O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
  ASSERT_TRUE(plain.valid());
  EXPECT_FALSE(ReopenableAs(kVmmUid, plain.get()));
}

TEST_F(GuestRamTest, KeepNeedsTheExactSizeAndReplaceStartsOver) {
  {
    auto fd = OpenGuestRam(dir_.get(), "ram", 1 << 20, false, kVmmUid);
    ASSERT_TRUE(fd.ok());
    ASSERT_EQ(::pwrite(fd->get(), "x", 1, 4096), 1);
  }
  EXPECT_FALSE(OpenGuestRam(dir_.get(), "ram", 2 << 20, true, kVmmUid).ok());
  auto kept = OpenGuestRam(dir_.get(), "ram", 1 << 20, true, kVmmUid);
  ASSERT_TRUE(kept.ok()) << kept.status().ToString();
  char c = 0;
  ASSERT_EQ(::pread(kept->get(), &c, 1, 4096), 1);
  EXPECT_EQ(c, 'x');
  auto fresh = OpenGuestRam(dir_.get(), "ram", 1 << 20, false, kVmmUid);
  ASSERT_TRUE(fresh.ok());
  ASSERT_EQ(::pread(fresh->get(), &c, 1, 4096), 1);
  EXPECT_EQ(c, 0);
}

TEST_F(GuestRamTest, RefusesASymlink) {
  ASSERT_EQ(::symlinkat("/etc/passwd", dir_.get(), "link"), 0);
  EXPECT_FALSE(OpenGuestRam(dir_.get(), "link", 1 << 20, true, kVmmUid).ok());
  // Replacing removes the link itself, never its target.
  auto fd = OpenGuestRam(dir_.get(), "link", 1 << 20, false, kVmmUid);
  ASSERT_TRUE(fd.ok());
  struct stat sb;
  ASSERT_EQ(::fstatat(dir_.get(), "link", &sb, AT_SYMLINK_NOFOLLOW), 0);
  EXPECT_TRUE(S_ISREG(sb.st_mode));
}

}  // namespace
}  // namespace space::runtime::vm
