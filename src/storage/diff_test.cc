// DiffTrees on plain directories (any filesystem, no root needed except for the owner case).
// The btrfs fast path (same inode and times across snapshots) is covered in snapshot_test.cc.
#include "storage/diff.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <functional>

#include <gtest/gtest.h>

#include "common/syscall.h"
#include "storage/fs_util.h"

namespace space::storage {
namespace {

using Paths = std::vector<std::string>;

void Write(const std::string& path, const std::string& data, mode_t mode = 0644) {
  ASSERT_TRUE(WriteFileAtomic(path, data, mode).ok()) << path;
}

void SetMtime(const std::string& path, time_t sec) {
  struct timespec ts[2] = {{sec, 0}, {sec, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), ts, AT_SYMLINK_NOFOLLOW), 0) << path;
}

// The tree both sides start from.
void MakeBase(const std::string& dir) {
  ASSERT_TRUE(MakeDirs(dir + "/sub/deep", 0755).ok());
  Write(dir + "/f", "hello");
  Write(dir + "/sub/g", "data");
  Write(dir + "/sub/deep/h", "deep");
  Write(dir + "/gone", "bye");
  ASSERT_EQ(::symlink("target1", (dir + "/l").c_str()), 0);
  for (const char* p : {"/f", "/sub/g", "/sub/deep/h", "/gone"}) SetMtime(dir + p, 1700000000);
}

struct Case {
  const char* name;
  std::function<void(const std::string& a, const std::string& b)> mutate;
  Paths added, changed, removed;
  size_t max_entries = 10000;
  bool truncated = false;
};

class DiffTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/var/tmp/space-diff-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    if (!dir_.empty()) {
      EXPECT_TRUE(RemoveTree(dir_).ok());
    }
  }
  std::string dir_;
};

TEST_F(DiffTest, Table) {
  const std::vector<Case> cases = {
      {"identical", [](auto&, auto&) {}, {}, {}, {}},
      {"same size, same mtime, other bytes: content decides",
       [](auto&, auto& b) {
         Write(b + "/f", "jello");
         SetMtime(b + "/f", 1700000000);
       },
       {},
       {"/f"},
       {}},
      {"rewritten with the same bytes: unchanged", [](auto&, auto& b) { Write(b + "/f", "hello"); }, {}, {}, {}},
      {"size change", [](auto&, auto& b) { Write(b + "/sub/g", "longer data"); }, {}, {"/sub/g"}, {}},
      {"mode change", [](auto&, auto& b) { ASSERT_EQ(::chmod((b + "/f").c_str(), 0600), 0); }, {}, {"/f"}, {}},
      {"dir mode change, children untouched",
       [](auto&, auto& b) { ASSERT_EQ(::chmod((b + "/sub").c_str(), 0700), 0); },
       {},
       {"/sub"},
       {}},
      {"symlink retarget, same length",
       [](auto&, auto& b) {
         ASSERT_EQ(::unlink((b + "/l").c_str()), 0);
         ASSERT_EQ(::symlink("target2", (b + "/l").c_str()), 0);
       },
       {},
       {"/l"},
       {}},
      {"dir added with children",
       [](auto&, auto& b) {
         ASSERT_TRUE(MakeDirs(b + "/new/e", 0755).ok());
         Write(b + "/new/x", "x");
         Write(b + "/new/e/y", "y");
       },
       {"/new", "/new/e", "/new/e/y", "/new/x"},
       {},
       {}},
      {"file removed", [](auto&, auto& b) { ASSERT_EQ(::unlink((b + "/gone").c_str()), 0); }, {}, {}, {"/gone"}},
      {"dir removed with children", [](auto&, auto& b) { ASSERT_TRUE(RemoveTree(b + "/sub").ok()); },
       {},
       {},
       {"/sub", "/sub/deep", "/sub/deep/h", "/sub/g"}},
      {"file replaced by a dir",
       [](auto&, auto& b) {
         ASSERT_EQ(::unlink((b + "/f").c_str()), 0);
         ASSERT_EQ(::mkdir((b + "/f").c_str(), 0755), 0);
         Write(b + "/f/inner", "i");
       },
       {"/f/inner"},
       {"/f"},
       {}},
      // Symlinks to directories outside the trees are compared as links, never entered:
      // "/" would otherwise add the whole host, and the dir->symlink swap would read /etc.
      {"symlinks out of the tree are not followed",
       [](auto&, auto& b) {
         ASSERT_EQ(::symlink("/", (b + "/escape").c_str()), 0);
         ASSERT_TRUE(RemoveTree(b + "/sub/deep").ok());
         ASSERT_EQ(::symlink("/etc", (b + "/sub/deep").c_str()), 0);
       },
       {"/escape"},
       {"/sub/deep"},
       {"/sub/deep/h"}},
      {"both sides link out, same target", [](auto& a, auto& b) {
         ASSERT_EQ(::symlink("/etc", (a + "/out").c_str()), 0);
         ASSERT_EQ(::symlink("/etc", (b + "/out").c_str()), 0);
       },
       {}, {}, {}},
      {"capped",
       [](auto&, auto& b) {
         for (const char* n : {"/n1", "/n2", "/n3", "/n4"}) Write(b + n, "n");
       },
       {"/n1", "/n2"},
       {},
       {},
       2,
       true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    std::string a = dir_ + "/a", b = dir_ + "/b";
    MakeBase(a);
    MakeBase(b);
    c.mutate(a, b);
    Result<TreeDiff> d = DiffTrees(a, b, c.max_entries);
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    EXPECT_EQ(d->added, c.added);
    EXPECT_EQ(d->changed, c.changed);
    EXPECT_EQ(d->removed, c.removed);
    EXPECT_EQ(d->truncated, c.truncated);
    // The reverse direction swaps added and removed.
    Result<TreeDiff> r = DiffTrees(b, a, c.max_entries);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    if (!c.truncated) {
      EXPECT_EQ(r->added, c.removed);
      EXPECT_EQ(r->removed, c.added);
    }
    ASSERT_TRUE(RemoveTree(a).ok());
    ASSERT_TRUE(RemoveTree(b).ok());
  }
}

TEST_F(DiffTest, OwnerChange) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (chown)";
  std::string a = dir_ + "/a", b = dir_ + "/b";
  MakeBase(a);
  MakeBase(b);
  ASSERT_EQ(::lchown((b + "/l").c_str(), 1000, 1000), 0);
  ASSERT_EQ(::chown((b + "/sub/g").c_str(), 0, 1000), 0);
  Result<TreeDiff> d = DiffTrees(a, b);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->changed, (Paths{"/l", "/sub/g"}));
}

TEST_F(DiffTest, RootsMustBeDirectoriesNotSymlinks) {
  std::string a = dir_ + "/a";
  MakeBase(a);
  ASSERT_EQ(::symlink(a.c_str(), (dir_ + "/link").c_str()), 0);
  EXPECT_FALSE(DiffTrees(dir_ + "/link", a).ok());
  EXPECT_EQ(DiffTrees(a, dir_ + "/missing").status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace space::storage
