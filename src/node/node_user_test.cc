#include "node/node_user.h"

#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

#include "common/syscall.h"

namespace space::node {
namespace {

uid_t Owner(const std::string& path) {
  struct stat sb;
  return ::lstat(path.c_str(), &sb) == 0 ? sb.st_uid : static_cast<uid_t>(-2);
}

// What a node that ran as root left in its dirs goes to its uid; nothing reached through a
// link, nothing with a second link, nothing of another owner, nothing on another filesystem.
TEST(NodeUserTest, GivesOnlyRootsSingleLinkEntriesBeneathWithoutFollowingLinks) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (chown)";
  char tmpl[] = "/var/tmp/node_user_XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string top = tmpl, tree = top + "/store", outside = top + "/outside";
  ASSERT_TRUE(MakeDirs(tree + "/objects/ab", 0700).ok());
  ASSERT_TRUE(MakeDirs(outside, 0700).ok());
  ASSERT_TRUE(WriteFileAtomic(tree + "/objects/ab/obj", "x", 0600).ok());
  ASSERT_TRUE(WriteFileAtomic(outside + "/secret", "s", 0600).ok());
  ASSERT_EQ(::symlink(outside.c_str(), (tree + "/link").c_str()), 0);
  ASSERT_EQ(::link((outside + "/secret").c_str(), (tree + "/hard").c_str()), 0);
  ASSERT_TRUE(WriteFileAtomic(tree + "/theirs", "t", 0600).ok());
  ASSERT_EQ(::chown((tree + "/theirs").c_str(), 1000, 1000), 0);
  ASSERT_TRUE(WriteFileAtomic(top + "/state.db", "db", 0600).ok());
  ASSERT_TRUE(WriteFileAtomic(top + "/pool.img", "img", 0600).ok());
  ASSERT_EQ(::symlink((outside + "/secret").c_str(), (top + "/api-key").c_str()), 0);
  ASSERT_TRUE(MakeDirs(tree + "/mnt", 0700).ok());
  ASSERT_EQ(::mount("tmpfs", (tree + "/mnt").c_str(), "tmpfs", 0, "size=1m"), 0);
  ASSERT_TRUE(WriteFileAtomic(tree + "/mnt/other-fs", "o", 0600).ok());

  constexpr uid_t kUid = 1234567;
  Status st = GiveToNodeUser({{.path = top, .files = {"state.db", "api-key", "absent"}},
                              {.path = tree, .recursive = true},
                              {.path = top + "/made/new", .recursive = true, .mode = 0711}},
                             kUid);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(Owner(top), kUid);
  EXPECT_EQ(Owner(top + "/state.db"), kUid);
  EXPECT_EQ(Owner(top + "/pool.img"), 0u);  // not named
  EXPECT_EQ(Owner(top + "/api-key"), 0u);   // a link: left as it is
  EXPECT_EQ(Owner(tree), kUid);
  EXPECT_EQ(Owner(tree + "/objects"), kUid);
  EXPECT_EQ(Owner(tree + "/objects/ab/obj"), kUid);
  EXPECT_EQ(Owner(tree + "/link"), 0u);
  EXPECT_EQ(Owner(tree + "/hard"), 0u);
  EXPECT_EQ(Owner(tree + "/theirs"), 1000u);
  EXPECT_EQ(Owner(outside), 0u);
  EXPECT_EQ(Owner(outside + "/secret"), 0u);
  EXPECT_EQ(Owner(top + "/made/new"), kUid);
  struct stat sb;
  ASSERT_EQ(::stat((top + "/made/new").c_str(), &sb), 0);
  EXPECT_EQ(sb.st_mode & 07777, 0711u);
  // Another filesystem (a subvolume, a mount) is not walked into.
  EXPECT_EQ(Owner(tree + "/mnt"), 0u);
  EXPECT_EQ(Owner(tree + "/mnt/other-fs"), 0u);
  ::umount((tree + "/mnt").c_str());
  std::system(("rm -rf " + top).c_str());
}

// A node's dirs below a directory of root's that others may not search: refused before the
// switch, naming that directory; fine once it lets others through.
TEST(NodeUserTest, ChecksThatItsUidCanReachItsDirs) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (setresuid in the child)";
  char tmpl[] = "/var/tmp/node_reach_XXXXXX";  // 0700, root's
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string top = tmpl, data = top + "/data";
  constexpr uid_t kUid = 1074790400;
  ASSERT_TRUE(MakeDirs(data, 0700).ok());
  ASSERT_EQ(::chown(data.c_str(), kUid, kUid), 0);
  Status st = CheckNodeCanReach({{.path = data}}, kUid);
  EXPECT_EQ(st.code(), StatusCode::kPermissionDenied) << st.ToString();
  EXPECT_NE(st.message().find(top + " must let others search it"), std::string::npos) << st.ToString();
  ASSERT_EQ(::chmod(top.c_str(), 0711), 0);
  st = CheckNodeCanReach({{.path = data}}, kUid);
  EXPECT_TRUE(st.ok()) << st.ToString();
  // Its own dir, but not writable by it: refused too.
  ASSERT_EQ(::chmod(data.c_str(), 0500), 0);
  EXPECT_EQ(CheckNodeCanReach({{.path = data}}, kUid).code(), StatusCode::kPermissionDenied);
  std::system(("rm -rf " + top).c_str());
}

}  // namespace
}  // namespace space::node
