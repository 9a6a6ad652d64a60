// Snapshots of sandbox roots on a loop-backed btrfs pool: read-only and frozen in time, O(1)
// (latency printed for docs), clones, rollback and its crash recovery, diffs between
// snapshots, exclusive bytes. Root only, like pool_test.cc.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include <gtest/gtest.h>

#include "common/clock.h"
#include "common/random.h"
#include "common/syscall.h"
#include "storage/diff.h"
#include "storage/digest.h"
#include "storage/fs_util.h"
#include "storage/pool_test_fixture.h"

namespace space::storage {
namespace {

using Paths = std::vector<std::string>;

class SnapshotTest : public PoolTest {
 protected:
  // A fresh root from busybox plus a few files of every kind DiffTrees and clones must keep.
  std::string MakeRoot(const std::string& id, uint64_t limit = 0) {
    if (digest_.empty()) digest_ = Busybox().digest;
    Result<std::string> root = pool_->CreateRoot(id, digest_, limit);
    EXPECT_TRUE(root.ok()) << root.status().ToString();
    return root.ok() ? *root : "";
  }

  std::string Snapshot(const std::string& id) {
    std::string snap = NewId("snap");
    Result<std::string> path = pool_->SnapshotRoot(id, snap);
    EXPECT_TRUE(path.ok()) << path.status().ToString();
    return snap;
  }

  std::string Read(const std::string& path) {
    Result<std::string> s = ReadFileToString(path, 16 << 20);
    return s.ok() ? *s : "<" + s.status().ToString() + ">";
  }

  // Commits the transaction, so qgroup numbers are current and snapshot timings exclude
  // the flush of dirty data.
  void SyncPool() {
    Result<UniqueFd> fd = OpenFd(Config().data_dir + "/pool", O_RDONLY | O_DIRECTORY);
    ASSERT_TRUE(fd.ok());
    ASSERT_EQ(::syncfs(fd->get()), 0);
  }

  std::string SandboxesDir() const { return Config().data_dir + "/pool/sandboxes"; }

  std::string digest_;
};

// Writes `bytes` of distinct 1 MiB chunks and leaves them dirty in the page cache (no fsync).
void WriteUnsynced(const std::string& path, uint64_t bytes) {
  Result<UniqueFd> fd = OpenFd(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ASSERT_TRUE(fd.ok()) << fd.status().ToString();
  std::string chunk(1 << 20, 'd');
  for (uint64_t off = 0; off < bytes; off += chunk.size()) {
    for (size_t i = 0; i < chunk.size(); i += 4096) chunk[i] = static_cast<char>(off >> 20);
    ASSERT_TRUE(WriteAll(fd->get(), chunk).ok());
  }
}

// 5 MiB that is not all one byte: each 4 KiB block carries its own index.
std::string FiveMiB() {
  std::string s(5 << 20, '\0');
  for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<char>((i >> 12) * 31 + i % 251);
  return s;
}

TEST_F(SnapshotTest, ReadOnlyAndFrozenAtSnapshotTime) {
  Open();
  ASSERT_TRUE(pool_);
  std::string root = MakeRoot("sbx_a");
  ASSERT_TRUE(WriteFileAtomic(root + "/data", "v1", 0644).ok());
  std::string snap = NewId("snap");
  Result<std::string> path = pool_->SnapshotRoot("sbx_a", snap);
  ASSERT_TRUE(path.ok()) << path.status().ToString();
  EXPECT_EQ(*path, pool_->SnapshotPath(snap));

  EXPECT_EQ(::open((*path + "/new").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644), -1);
  EXPECT_EQ(errno, EROFS);
  EXPECT_EQ(::open((*path + "/data").c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC), -1);
  EXPECT_EQ(errno, EROFS);
  EXPECT_EQ(::unlink((*path + "/bin/ls").c_str()), -1);
  EXPECT_EQ(errno, EROFS);

  ASSERT_TRUE(WriteFileAtomic(root + "/data", "v2", 0644).ok());
  ASSERT_EQ(::unlink((root + "/bin/ls").c_str()), 0);
  EXPECT_EQ(Read(*path + "/data"), "v1");
  EXPECT_TRUE(PathExists(*path + "/bin/ls"));
  EXPECT_EQ(Read(root + "/data"), "v2");

  Result<Paths> snaps = pool_->ListSnapshots();
  ASSERT_TRUE(snaps.ok());
  EXPECT_EQ(*snaps, Paths{snap});
  EXPECT_EQ(pool_->SnapshotRoot("sbx_a", snap).status().code(), StatusCode::kConflict);
  EXPECT_EQ(pool_->SnapshotRoot("sbx_none", NewId("snap")).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(pool_->SnapshotRoot("sbx_a", "snap_short").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(pool_->SnapshotRoot("../x", NewId("snap")).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(pool_->DeleteSnapshot("../../templates").code(), StatusCode::kInvalidArgument);

  ASSERT_TRUE(pool_->DeleteSnapshot(snap).ok());
  EXPECT_FALSE(PathExists(*path));
  EXPECT_TRUE(pool_->DeleteSnapshot(snap).ok());  // idempotent
  snaps = pool_->ListSnapshots();
  ASSERT_TRUE(snaps.ok());
  EXPECT_TRUE(snaps->empty());
}

// Snapshot and clone latency for roots holding 10 MiB and 200 MiB of written data. Printed
// for the docs, not asserted (shared CI disks vary). The first snapshot after writing, with
// the data still dirty in the page cache, is printed separately: btrfs flushes the root's
// dirty data before snapshotting it, so that one costs O(dirty bytes) while the sandbox is
// frozen.
TEST_F(SnapshotTest, SnapshotLatencyIsFlat) {
  Open();
  ASSERT_TRUE(pool_);
  constexpr int kRuns = 15;
  for (uint64_t mib : {10, 200}) {
    std::string id = "lat_" + std::to_string(mib);
    std::string root = MakeRoot(id);
    ASSERT_TRUE(MakeDirs(root + "/data", 0755).ok());
    for (uint64_t i = 0; i < mib / 10; ++i) {
      WriteUnsynced(root + "/data/f" + std::to_string(i), 10 << 20);
    }
    int64_t t0 = MonoNowNs();
    std::string dirty_snap = Snapshot(id);
    int64_t dirty_ns = MonoNowNs() - t0;
    SyncPool();
    std::vector<int64_t> snap_ns, clone_ns;
    for (int i = 0; i < kRuns; ++i) {
      std::string snap = NewId("snap");
      int64_t a = MonoNowNs();
      Result<std::string> s = pool_->SnapshotRoot(id, snap);
      int64_t b = MonoNowNs();
      ASSERT_TRUE(s.ok()) << s.status().ToString();
      std::string child = "lat_child_" + std::to_string(i);
      Result<std::string> c = pool_->CreateRootFromSnapshot(child, snap, 1ull << 30);
      int64_t e = MonoNowNs();
      ASSERT_TRUE(c.ok()) << c.status().ToString();
      snap_ns.push_back(b - a);
      clone_ns.push_back(e - b);
      ASSERT_TRUE(pool_->DestroyRoot(child).ok());
      ASSERT_TRUE(pool_->DeleteSnapshot(snap).ok());
    }
    std::sort(snap_ns.begin(), snap_ns.end());
    std::sort(clone_ns.begin(), clone_ns.end());
    std::printf("root with %3llu MiB written: SnapshotRoot median %.2f ms (max %.2f), CreateRootFromSnapshot "
                "median %.2f ms (max %.2f); first snapshot with the data still dirty %.2f ms\n",
                static_cast<unsigned long long>(mib), snap_ns[kRuns / 2] / 1e6, snap_ns.back() / 1e6,
                clone_ns[kRuns / 2] / 1e6, clone_ns.back() / 1e6, dirty_ns / 1e6);
    ASSERT_TRUE(pool_->DeleteSnapshot(dirty_snap).ok());
    ASSERT_TRUE(pool_->DestroyRoot(id).ok());
  }
}

TEST_F(SnapshotTest, CloneIsIdenticalWritableAndIndependent) {
  Open();
  ASSERT_TRUE(pool_);
  std::string root = MakeRoot("sbx_parent");
  const std::string big = FiveMiB();
  ASSERT_TRUE(WriteFileAtomic(root + "/big", big, 0600).ok());
  ASSERT_TRUE(MakeDirs(root + "/home/user/proj", 0750).ok());
  ASSERT_TRUE(WriteFileAtomic(root + "/home/user/proj/main.py", "print(1)\n", 0755).ok());
  ASSERT_EQ(::chown((root + "/home/user/proj").c_str(), 1000, 1000), 0);
  ASSERT_EQ(::symlink("proj/main.py", (root + "/home/user/link").c_str()), 0);
  std::string snap = Snapshot("sbx_parent");

  Result<std::string> child = pool_->CreateRootFromSnapshot("sbx_child", snap, 16 << 20);
  ASSERT_TRUE(child.ok()) << child.status().ToString();
  EXPECT_EQ(*child, pool_->RootPath("sbx_child"));
  Result<TreeDigest> want = DigestTree(root);  // paths, types, modes, owners, bytes
  Result<TreeDigest> got = DigestTree(*child);
  ASSERT_TRUE(want.ok() && got.ok());
  EXPECT_EQ(got->digest, want->digest);
  EXPECT_EQ(Read(*child + "/big"), big);
  EXPECT_EQ(ReadLink(*child + "/home/user/link"), "proj/main.py");
  Result<TreeDiff> d = DiffTrees(pool_->SnapshotPath(snap), *child);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_TRUE(d->added.empty() && d->changed.empty() && d->removed.empty());

  // Writable, and writes stay on their side.
  ASSERT_TRUE(WriteFileAtomic(*child + "/home/user/proj/main.py", "print(2)\n", 0755).ok());
  ASSERT_TRUE(WriteFileAtomic(root + "/big", "parent changed", 0600).ok());
  EXPECT_EQ(Read(root + "/home/user/proj/main.py"), "print(1)\n");
  EXPECT_EQ(Read(pool_->SnapshotPath(snap) + "/home/user/proj/main.py"), "print(1)\n");
  EXPECT_EQ(Read(*child + "/big"), big);

  // The disk limit applies to the clone.
  auto [err, written] = FillFile(*child + "/fill", 64 << 20);
  if (err == 0) {
    SyncPool();
    std::tie(err, written) = FillFile(*child + "/fill2", 64 << 20);
  }
  EXPECT_EQ(err, EDQUOT) << "wrote " << written << " bytes past a 16 MiB limit";
  ASSERT_EQ(::unlink((*child + "/fill").c_str()), 0);
  ::unlink((*child + "/fill2").c_str());

  EXPECT_EQ(pool_->CreateRootFromSnapshot("sbx_child", snap, 0).status().code(), StatusCode::kConflict);
  EXPECT_EQ(pool_->CreateRootFromSnapshot("sbx_x", NewId("snap"), 0).status().code(), StatusCode::kNotFound);

  // Deleting the parent snapshot (and the parent root) leaves the child whole.
  ASSERT_TRUE(pool_->DeleteSnapshot(snap).ok());
  ASSERT_TRUE(pool_->DestroyRoot("sbx_parent").ok());
  EXPECT_EQ(Read(*child + "/big"), big);
  EXPECT_EQ(Read(*child + "/home/user/proj/main.py"), "print(2)\n");
  ASSERT_TRUE(pool_->DestroyRoot("sbx_child").ok());
}

TEST_F(SnapshotTest, ReplaceRootRestoresSnapshot) {
  Open();
  ASSERT_TRUE(pool_);
  std::string root = MakeRoot("sbx_r");
  ASSERT_TRUE(WriteFileAtomic(root + "/data", "v1", 0644).ok());
  std::string snap = Snapshot("sbx_r");
  ASSERT_TRUE(WriteFileAtomic(root + "/data", "v2", 0644).ok());
  ASSERT_TRUE(WriteFileAtomic(root + "/extra", "x", 0644).ok());
  ASSERT_EQ(::unlink((root + "/bin/ls").c_str()), 0);

  ASSERT_TRUE(pool_->ReplaceRootFromSnapshot("sbx_r", snap, 64 << 20).ok());
  EXPECT_EQ(pool_->RootPath("sbx_r"), root);
  EXPECT_EQ(Read(root + "/data"), "v1");
  EXPECT_FALSE(PathExists(root + "/extra"));
  EXPECT_TRUE(PathExists(root + "/bin/ls"));
  Result<TreeDiff> d = DiffTrees(pool_->SnapshotPath(snap), root);
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->added.empty() && d->changed.empty() && d->removed.empty());
  ASSERT_TRUE(WriteFileAtomic(root + "/data", "v3", 0644).ok());  // writable again
  EXPECT_EQ(Read(pool_->SnapshotPath(snap) + "/data"), "v1");
  Result<Paths> entries = ListDir(SandboxesDir());
  ASSERT_TRUE(entries.ok());
  EXPECT_EQ(*entries, Paths{"sbx_r"});  // no staging tree left

  EXPECT_EQ(pool_->ReplaceRootFromSnapshot("sbx_none", snap, 0).code(), StatusCode::kNotFound);
  EXPECT_EQ(pool_->ReplaceRootFromSnapshot("sbx_r", NewId("snap"), 0).code(), StatusCode::kNotFound);
  ASSERT_TRUE(pool_->DestroyRoot("sbx_r").ok());
}

// A crash mid-rollback, made by hand: every combination of the root and its staging trees
// must come back as one whole root, the right one, with nothing else left.
TEST_F(SnapshotTest, OpenRecoversInterruptedRollback) {
  Open();
  ASSERT_TRUE(pool_);
  struct Case {
    const char* name;
    bool root, fresh, old;
    const char* want;  // marker of the tree expected at the root path
  };
  const Case cases[] = {
      {"before the swap: root + .new", true, true, false, "root"},
      {"after rename-aside: .new + .old", false, true, true, "new"},
      {"after rename-in: root + .old", true, false, true, "root"},
      {"only .new", false, true, false, "new"},
      {"only .old", false, false, true, "old"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string id = "sbx_crash";
    auto make = [&](const std::string& entry, const std::string& marker) {
      std::string tmp = MakeRoot("sbx_tmp");
      ASSERT_TRUE(WriteFileAtomic(tmp + "/marker", marker, 0644).ok());
      ASSERT_EQ(::rename(tmp.c_str(), (SandboxesDir() + "/" + entry).c_str()), 0);
    };
    if (c.root) make(id, "root");
    if (c.fresh) make("." + id + ".new", "new");
    if (c.old) make("." + id + ".old", "old");
    Result<Paths> roots = pool_->ListRoots();
    ASSERT_TRUE(roots.ok());
    EXPECT_EQ(*roots, c.root ? Paths{id} : Paths{});  // dot-entries are not roots

    pool_.reset();
    Open();
    ASSERT_TRUE(pool_);
    EXPECT_EQ(Read(pool_->RootPath(id) + "/marker"), c.want);
    Result<Paths> entries = ListDir(SandboxesDir());
    ASSERT_TRUE(entries.ok());
    EXPECT_EQ(*entries, Paths{id});
    ASSERT_TRUE(pool_->DestroyRoot(id).ok());
  }
}

// DiffTrees between two snapshots of one root: unchanged files share inode numbers and times
// (the fast path), so only what was touched is read or listed.
TEST_F(SnapshotTest, DiffBetweenSnapshots) {
  Open();
  ASSERT_TRUE(pool_);
  std::string root = MakeRoot("sbx_d");
  ASSERT_TRUE(WriteFileAtomic(root + "/f", "hello", 0644).ok());
  ASSERT_TRUE(WriteFileAtomic(root + "/same", "same", 0644).ok());
  ASSERT_EQ(::symlink("/etc", (root + "/out").c_str()), 0);
  std::string s1 = Snapshot("sbx_d");

  // Same size, mtime put back: only ctime gives it away, then the bytes decide.
  struct stat st;
  ASSERT_EQ(::stat((root + "/f").c_str(), &st), 0);
  {
    Result<UniqueFd> fd = OpenFd(root + "/f", O_WRONLY);
    ASSERT_TRUE(fd.ok());
    ASSERT_EQ(::pwrite(fd->get(), "j", 1, 0), 1);
  }
  struct timespec ts[2] = {st.st_atim, st.st_mtim};
  ASSERT_EQ(::utimensat(AT_FDCWD, (root + "/f").c_str(), ts, 0), 0);
  // Rewritten in place with the same bytes: not a change.
  ASSERT_TRUE(WriteFileAtomic(root + "/same", "same", 0644).ok());
  ASSERT_EQ(::chmod((root + "/bin/busybox").c_str(), 0700), 0);
  ASSERT_EQ(::unlink((root + "/out").c_str()), 0);
  ASSERT_EQ(::symlink("/usr", (root + "/out").c_str()), 0);
  ASSERT_TRUE(MakeDirs(root + "/work/src", 0755).ok());
  ASSERT_TRUE(WriteFileAtomic(root + "/work/src/a.c", "int main;", 0644).ok());
  ASSERT_EQ(::unlink((root + "/etc/hostname").c_str()), 0);
  std::string s2 = Snapshot("sbx_d");

  Result<TreeDiff> d = DiffTrees(pool_->SnapshotPath(s1), pool_->SnapshotPath(s2));
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->added, (Paths{"/work", "/work/src", "/work/src/a.c"}));
  EXPECT_EQ(d->changed, (Paths{"/bin/busybox", "/f", "/out"}));
  EXPECT_EQ(d->removed, (Paths{"/etc/hostname"}));
  EXPECT_FALSE(d->truncated);
  Result<TreeDiff> capped = DiffTrees(pool_->SnapshotPath(s1), pool_->SnapshotPath(s2), 4);
  ASSERT_TRUE(capped.ok());
  EXPECT_TRUE(capped->truncated);
  EXPECT_EQ(capped->added.size() + capped->changed.size() + capped->removed.size(), 4u);
}

TEST_F(SnapshotTest, ExclusiveBytesGrowWhenTheRootMovesOn) {
  Open();
  ASSERT_TRUE(pool_);
  std::string root = MakeRoot("sbx_q");
  ASSERT_EQ(FillFile(root + "/blob", 8 << 20).first, 0);
  std::string s1 = Snapshot("sbx_q");
  SyncPool();
  uint64_t before = pool_->SnapshotExclusiveBytes(s1);
  // The root drops the blob and writes new data, then moves on to a second snapshot: the old
  // blob is now referenced by s1 alone.
  ASSERT_EQ(::unlink((root + "/blob").c_str()), 0);
  ASSERT_EQ(FillFile(root + "/blob2", 8 << 20).first, 0);
  std::string s2 = Snapshot("sbx_q");
  SyncPool();
  uint64_t after = pool_->SnapshotExclusiveBytes(s1);
  uint64_t s2_excl = pool_->SnapshotExclusiveBytes(s2);
  std::printf("snapshot exclusive bytes: s1 %llu KiB -> %llu KiB after the root replaced 8 MiB; s2 %llu KiB\n",
              static_cast<unsigned long long>(before >> 10), static_cast<unsigned long long>(after >> 10),
              static_cast<unsigned long long>(s2_excl >> 10));
  EXPECT_LT(before, 1u << 20);
  EXPECT_GE(after, 8u << 20);
  EXPECT_LT(s2_excl, 1u << 20);
  EXPECT_EQ(pool_->SnapshotExclusiveBytes(NewId("snap")), 0u);
  EXPECT_EQ(pool_->SnapshotExclusiveBytes("bad"), 0u);
}

TEST_F(SnapshotTest, OverlayPoolHasNoSnapshots) {
  Open(/*overlay=*/true);
  ASSERT_TRUE(pool_);
  std::string root = MakeRoot("ov_s");
  std::string snap = NewId("snap");
  EXPECT_EQ(pool_->SnapshotRoot("ov_s", snap).status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(pool_->CreateRootFromSnapshot("ov_t", snap, 0).status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(pool_->ReplaceRootFromSnapshot("ov_s", snap, 0).code(), StatusCode::kUnavailable);
  EXPECT_EQ(pool_->ListSnapshots().status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(pool_->DeleteSnapshot(snap).code(), StatusCode::kUnavailable);
  EXPECT_EQ(pool_->SnapshotExclusiveBytes(snap), 0u);
  ASSERT_TRUE(pool_->DestroyRoot("ov_s").ok());
}

}  // namespace
}  // namespace space::storage

namespace space::storage {
namespace {

// A snapshot brought back from elsewhere (the snapshot store) becomes an ordinary read-only
// local snapshot; a failed fill leaves nothing.
TEST_F(SnapshotTest, ImportSnapshotSealsOrLeavesNothing) {
  Open();
  ASSERT_TRUE(pool_);
  std::string good = NewId("snap");
  Status st = pool_->ImportSnapshot(good, [](const std::string& dir) {
    return WriteFileAtomic(dir + "/hello", "from the store\n", 0644);
  });
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(Read(pool_->SnapshotPath(good) + "/hello"), "from the store\n");
  EXPECT_NE(::open((pool_->SnapshotPath(good) + "/new").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644), 0);
  EXPECT_EQ(errno, EROFS);
  ASSERT_TRUE(pool_->CreateRootFromSnapshot("sbx_imp", good, 0).ok());
  EXPECT_EQ(Read(pool_->RootPath("sbx_imp") + "/hello"), "from the store\n");
  EXPECT_EQ(pool_->ImportSnapshot(good, [](const std::string&) { return Status::Ok(); }).code(),
            StatusCode::kConflict);

  std::string bad = NewId("snap");
  st = pool_->ImportSnapshot(bad, [](const std::string& dir) {
    (void)WriteFileAtomic(dir + "/partial", "x", 0644);
    return Internal("object corrupt");
  });
  EXPECT_FALSE(st.ok());
  EXPECT_FALSE(PathExists(pool_->SnapshotPath(bad)));
  Result<Paths> left = ListDir(Config().data_dir + "/pool/snapshots");
  ASSERT_TRUE(left.ok());
  EXPECT_EQ(*left, Paths{good});
  ASSERT_TRUE(pool_->DestroyRoot("sbx_imp").ok());
}

}  // namespace
}  // namespace space::storage
