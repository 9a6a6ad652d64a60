// The tree jail reads what only its namespace's capabilities reach (files of a sandbox's users,
// mode 0600 and 0700) through read-only idmapped clones, and the node takes its result as
// hostile input. This binary is also the jail's helper: SpawnHelper re-execs it as
// `tree-jail` (main below).
#include "node/tree_jail.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "common/syscall.h"
#include "common/unique_fd.h"
#include "snapshot/local_blob_store.h"
#include "snapshot/manifest.h"
#include "snapshot/test_util.h"

namespace space::node {
namespace {

constexpr int64_t kSlot = 16101;

class TreeJailTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root (id maps, idmapped mounts)";
    char tmpl[] = "/var/tmp/tree-jail-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    config_.acquire_slot = [this]() -> Result<int64_t> {
      ++acquired_;
      return kSlot;
    };
    config_.release_slot = [this](int64_t slot) { released_ += slot == kSlot; };
  }
  void TearDown() override {
    if (!dir_.empty()) (void)std::system(("rm -rf " + dir_).c_str());
  }

  // A file owned by `uid` with `mode` and content `text`, its mtime fixed (so only ctime and
  // the bytes can tell two apart).
  void File(const std::string& path, const std::string& text, uid_t uid, mode_t mode) {
    UniqueFd f(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
    ASSERT_TRUE(f.valid()) << path;
    ASSERT_EQ(::write(f.get(), text.data(), text.size()), static_cast<ssize_t>(text.size()));
    ASSERT_EQ(::chown(path.c_str(), uid, uid), 0);
    ASSERT_EQ(::chmod(path.c_str(), mode), 0);
    struct timespec t[2] = {{1700000000, 0}, {1700000000, 0}};
    ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), t, AT_SYMLINK_NOFOLLOW), 0);
  }
  void Dir(const std::string& path, uid_t uid, mode_t mode) {
    ASSERT_EQ(::mkdir(path.c_str(), mode), 0) << path;
    ASSERT_EQ(::chown(path.c_str(), uid, uid), 0);
    ASSERT_EQ(::chmod(path.c_str(), mode), 0);
  }

  std::string dir_;
  TreeJailConfig config_;
  int acquired_ = 0, released_ = 0;
};

TEST_F(TreeJailTest, DiffsFilesOnlyItsNamespaceMayReadAndReleasesTheSlot) {
  const std::string a = dir_ + "/a", b = dir_ + "/b";
  for (const auto& t : {a, b}) {
    Dir(t, 0, 0755);
    File(t + "/same", "abc", 1000, 0600);    // equal bytes: read on both sides, not a change
    File(t + "/root-only", "r", 0, 0000);     // not even root's to read without a capability
    Dir(t + "/home", 1000, 0700);
  }
  File(a + "/secret", "one", 1000, 0600);
  File(b + "/secret", "two", 1000, 0600);    // same size and mtime: the bytes decide
  File(a + "/home/x", "x", 1000, 0600);       // only below a 0700 directory of uid 1000
  File(b + "/added", "new", 2000, 0640);
  Result<storage::TreeDiff> d = DiffInTreeJail(config_, a, b);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->added, std::vector<std::string>{"/added"});
  EXPECT_EQ(d->changed, std::vector<std::string>{"/secret"});
  EXPECT_EQ(d->removed, std::vector<std::string>{"/home/x"});
  EXPECT_FALSE(d->truncated);
  // What the node would have found itself, with host root's capabilities.
  Result<storage::TreeDiff> direct = storage::DiffTrees(a, b);
  ASSERT_TRUE(direct.ok());
  EXPECT_EQ(d->added, direct->added);
  EXPECT_EQ(d->changed, direct->changed);
  EXPECT_EQ(d->removed, direct->removed);
  EXPECT_EQ(acquired_, 1);
  EXPECT_EQ(released_, 1);
  // The clones were read-only and detached: nothing of them is left mounted.
  Result<std::string> mounts = ReadFileToString("/proc/self/mountinfo", 1 << 20);
  ASSERT_TRUE(mounts.ok());
  EXPECT_EQ(mounts->find(dir_), std::string::npos);
}

TEST_F(TreeJailTest, TruncatesAtTheLimitAndRefusesALinkedTree) {
  const std::string a = dir_ + "/a", b = dir_ + "/b";
  Dir(a, 0, 0755);
  Dir(b, 0, 0755);
  for (int i = 0; i < 20; ++i) File(b + "/f" + std::to_string(100 + i), "x", 1000, 0600);
  Result<storage::TreeDiff> d = DiffInTreeJail(config_, a, b, 5);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_TRUE(d->truncated);
  EXPECT_LE(d->added.size(), 6u);
  ASSERT_EQ(::symlink(a.c_str(), (dir_ + "/link").c_str()), 0);
  EXPECT_FALSE(DiffInTreeJail(config_, dir_ + "/link", b).ok());  // never followed
  EXPECT_EQ(acquired_, released_);
}

TEST_F(TreeJailTest, ExportsFilesOnlyItsNamespaceMayReadIntoTheNodesStore) {
  const std::string tree = dir_ + "/tree";
  Dir(tree, 0, 0755);
  Dir(tree + "/home", 1000, 0700);
  File(tree + "/home/secret", "a user's secret", 1000, 0600);
  File(tree + "/root-only", "r", 0, 0000);
  File(tree + "/big", std::string(5 << 20, 'z'), 2000, 0640);  // two chunks
  auto jail_store = snapshot::LocalBlobStore::Open(dir_ + "/store");
  auto direct_store = snapshot::LocalBlobStore::Open(dir_ + "/direct");
  ASSERT_TRUE(jail_store.ok() && direct_store.ok());
  Result<snapshot::ExportStats> st = ExportInTreeJail(config_, tree, "snap_1", "", **jail_store);
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_EQ(st->files, 3u);
  EXPECT_GE(st->objects_written, 3u);
  // The same manifest as an export by the node itself with host root's capabilities.
  ASSERT_TRUE(snapshot::Export(tree, "snap_1", "", **direct_store).ok());
  Result<snapshot::Manifest> jailed = snapshot::LoadManifest(**jail_store, "snap_1");
  Result<snapshot::Manifest> direct = snapshot::LoadManifest(**direct_store, "snap_1");
  ASSERT_TRUE(jailed.ok() && direct.ok()) << jailed.status().ToString();
  ASSERT_EQ(jailed->entries.size(), direct->entries.size());
  for (size_t i = 0; i < jailed->entries.size(); ++i) {
    const auto &j = jailed->entries[i], &d = direct->entries[i];
    EXPECT_EQ(std::tie(j.path, j.mode, j.uid, j.gid, j.size, j.chunks), std::tie(d.path, d.mode, d.uid, d.gid, d.size, d.chunks))
        << j.path;
  }
  // Incremental on it: the unchanged files come from the parent's manifest, unread.
  File(tree + "/added", "new", 1000, 0600);
  st = ExportInTreeJail(config_, tree, "snap_2", "snap_1", **jail_store);
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_EQ(st->files_reused, 3u);
  EXPECT_EQ(st->objects_written, 1u);
  // An id already exported: the jail's error comes back, and nothing is committed twice.
  EXPECT_FALSE(ExportInTreeJail(config_, tree, "snap_2", "snap_1", **jail_store).ok());
  EXPECT_FALSE(ExportInTreeJail(config_, tree, "../x", "", **jail_store).ok());
  EXPECT_EQ(acquired_, released_);

  // And back: restored in the jail, owners, modes and bytes as exported.
  const std::string dest = dir_ + "/restored";
  Dir(dest, 0, 0755);
  Status restored = RestoreInTreeJail(config_, "snap_2", **jail_store, dest);
  ASSERT_TRUE(restored.ok()) << restored.ToString();
  EXPECT_EQ(snapshot::testing::Fingerprint(dest, /*with_owner=*/true),
            snapshot::testing::Fingerprint(tree, /*with_owner=*/true));
  struct stat secret;
  ASSERT_EQ(::stat((dest + "/home/secret").c_str(), &secret), 0);
  EXPECT_EQ(secret.st_uid, 1000u);
  EXPECT_EQ(secret.st_mode & 07777, 0600u);
  // A snapshot the store does not hold, and a destination already filled: refused, nothing
  // written through.
  const std::string other = dir_ + "/other";
  Dir(other, 0, 0755);
  EXPECT_FALSE(RestoreInTreeJail(config_, "snap_9", **jail_store, other).ok());
  EXPECT_FALSE(RestoreInTreeJail(config_, "snap_2", **jail_store, dest).ok());
  EXPECT_EQ(acquired_, released_);
}

TEST_F(TreeJailTest, DigestsATreeOfOtherOwnersAsTheNodeWould) {
  const std::string tree = dir_ + "/tree";
  Dir(tree, 0, 0755);
  Dir(tree + "/cache", 42, 0700);  // like /var/cache/apt/archives/partial, _apt's
  File(tree + "/cache/lock", "", 42, 0640);
  File(tree + "/shadow", "root:*:1::::::\n", 0, 0640);
  File(tree + "/secret", "x", 1000, 0600);
  ASSERT_EQ(::symlink("secret", (tree + "/link").c_str()), 0);
  Result<storage::TreeDigest> jailed = DigestInTreeJail(config_, tree);
  ASSERT_TRUE(jailed.ok()) << jailed.status().ToString();
  Result<storage::TreeDigest> direct = storage::DigestTree(tree);
  ASSERT_TRUE(direct.ok());
  EXPECT_EQ(jailed->digest, direct->digest);
  EXPECT_EQ(jailed->size_bytes, direct->size_bytes);
  // Any change of an owner shows (the jail sees the on-disk ids, not its own).
  ASSERT_EQ(::chown((tree + "/secret").c_str(), 1001, 1000), 0);
  Result<storage::TreeDigest> changed = DigestInTreeJail(config_, tree);
  ASSERT_TRUE(changed.ok());
  EXPECT_NE(changed->digest, jailed->digest);
  EXPECT_EQ(changed->digest, storage::DigestTree(tree)->digest);
  EXPECT_EQ(acquired_, released_);
}

TEST(ParseTreeDiffTest, TakesOnlyABoundedWellFormedResult) {
  Result<storage::TreeDiff> ok =
      ParseTreeDiff(R"({"added":["/a"],"changed":["/b c"],"removed":[],"truncated":true})", 10);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->changed, std::vector<std::string>{"/b c"});
  EXPECT_TRUE(ok->truncated);
  for (const std::string& bad : std::vector<std::string>{
           "", "[]", "not json", R"({"error":"walk failed"})",
           R"({"added":["/a"],"changed":[],"removed":[]})",
           R"({"added":"/a","changed":[],"removed":[],"truncated":false})",
           R"({"added":[7],"changed":[],"removed":[],"truncated":false})",
           R"({"added":["relative"],"changed":[],"removed":[],"truncated":false})",
           R"({"added":[""],"changed":[],"removed":[],"truncated":false})",
           R"({"added":["/a"],"changed":[],"removed":[],"truncated":"no"})",
           R"({"added":["/1","/2","/3","/4","/5"],"changed":[],"removed":[],"truncated":false})"}) {
    EXPECT_FALSE(ParseTreeDiff(bad, 1).ok()) << bad;
  }
  EXPECT_FALSE(ParseTreeDiff(R"({"added":["/)" + std::string(5000, 'a') + R"("],"changed":[],"removed":[],"truncated":false})", 10).ok());
}

}  // namespace
}  // namespace space::node

int main(int argc, char** argv) {
  // The helper ends with _exit, as `space tree-jail` does (no exit-time handlers in the jail).
  if (argc >= 2 && std::strcmp(argv[1], "tree-jail") == 0) {
    int code = space::node::TreeJailMain(argc, argv);
    std::fflush(nullptr);
    ::_exit(code);
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
