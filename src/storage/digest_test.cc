#include "storage/digest.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>

#include <gtest/gtest.h>

#include "common/syscall.h"
#include "storage/fs_util.h"

namespace space::storage {
namespace {

class DigestTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/space-digest-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    ASSERT_EQ(::chmod(dir_.c_str(), 0755), 0);
    ASSERT_TRUE(MakeDirs(dir_ + "/etc/sub", 0755).ok());
    Write("etc/passwd", "root:x:0:0::/root:/bin/sh\n");
    Write("etc/sub/data", std::string(300000, 'x'));
    Write("empty", "");
    ASSERT_EQ(::symlink("etc/passwd", (dir_ + "/link").c_str()), 0);
    ASSERT_EQ(::mkfifo((dir_ + "/fifo").c_str(), 0644), 0);
  }
  void TearDown() override { ASSERT_TRUE(RemoveTree(dir_).ok()); }

  void Write(const std::string& rel, const std::string& data) {
    ASSERT_TRUE(WriteFileAtomic(dir_ + "/" + rel, data, 0644).ok());
  }
  std::string Digest() {
    Result<TreeDigest> d = DigestTree(dir_);
    EXPECT_TRUE(d.ok()) << d.status().ToString();
    return d.ok() ? d->digest : "";
  }

  std::string dir_;
};

TEST_F(DigestTest, StableAndWellFormed) {
  std::string a = Digest();
  EXPECT_EQ(a.size(), 7u + 64u);
  EXPECT_EQ(a.rfind("sha256:", 0), 0u);
  EXPECT_EQ(Digest(), a);
  Result<TreeDigest> d = DigestTree(dir_);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->size_bytes, 26u + 300000u + 10u);  // passwd + data + symlink target
  // Timestamps do not count.
  ASSERT_EQ(::utimensat(AT_FDCWD, (dir_ + "/etc/passwd").c_str(), nullptr, 0), 0);
  EXPECT_EQ(Digest(), a);
}

TEST_F(DigestTest, ChangesWithContentModeLinkAndNames) {
  std::string a = Digest();
  Write("etc/sub/data", std::string(299999, 'x') + "y");  // one byte, same size
  std::string b = Digest();
  EXPECT_NE(b, a);
  ASSERT_EQ(::chmod((dir_ + "/etc/sub/data").c_str(), 0755), 0);
  std::string c = Digest();
  EXPECT_NE(c, b);
  ASSERT_EQ(::unlink((dir_ + "/link").c_str()), 0);
  ASSERT_EQ(::symlink("etc/sub", (dir_ + "/link").c_str()), 0);
  std::string d = Digest();
  EXPECT_NE(d, c);
  ASSERT_EQ(::rename((dir_ + "/empty").c_str(), (dir_ + "/empty2").c_str()), 0);
  std::string e = Digest();
  EXPECT_NE(e, d);
  ASSERT_EQ(::chmod(dir_.c_str(), 0700), 0);  // the root's own mode counts too
  EXPECT_NE(Digest(), e);
}

TEST_F(DigestTest, ChangesWithOwner) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to chown";
  std::string a = Digest();
  ASSERT_EQ(::lchown((dir_ + "/link").c_str(), 1000, 0), 0);
  std::string b = Digest();
  EXPECT_NE(b, a);
  ASSERT_EQ(::chown((dir_ + "/empty").c_str(), 0, 1000), 0);
  EXPECT_NE(Digest(), b);
}

TEST_F(DigestTest, DoesNotFollowSymlinks) {
  std::string a = Digest();
  // The link's target content changes only via the file it names, never through the link.
  ASSERT_EQ(::unlink((dir_ + "/link").c_str()), 0);
  ASSERT_EQ(::symlink("/etc/passwd", (dir_ + "/link").c_str()), 0);
  std::string b = Digest();
  EXPECT_NE(b, a);
  EXPECT_FALSE(DigestTree(dir_ + "/link").ok());  // the root itself must not be a symlink
}

TEST(Sha256Test, KnownVector) {
  EXPECT_EQ(Sha256Hex("abc"), "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

}  // namespace
}  // namespace space::storage
