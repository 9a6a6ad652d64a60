// Test support shared by the pool's root-only test files (pool_test.cc, snapshot_test.cc):
// a fixture that opens a pool on a 2 GiB sparse loop-backed btrfs under /var/tmp and, on
// teardown, unmounts it and checks that no mount or loop device is left behind.
#pragma once

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "common/syscall.h"
#include "storage/fs_util.h"
#include "storage/pool.h"

namespace space::storage {

inline constexpr uint64_t kImageBytes = 2ull << 30;

inline int MountCount(const std::string& mount_point) {
  std::ifstream in("/proc/self/mountinfo");
  int n = 0;
  for (std::string line; std::getline(in, line);) {
    std::istringstream f(line);
    std::string id, parent, devno, root, mp;
    f >> id >> parent >> devno >> root >> mp;
    if (mp == mount_point) ++n;
  }
  return n;
}

// Loop devices whose backing file lies under `dir`.
inline std::vector<std::string> LoopsBackedBy(const std::string& dir) {
  std::vector<std::string> out;
  Result<std::vector<std::string>> names = ListDir("/sys/block");
  if (!names.ok()) return out;
  for (const auto& n : *names) {
    Result<std::string> backing = ReadFileToString("/sys/block/" + n + "/loop/backing_file");
    if (backing.ok() && backing->rfind(dir, 0) == 0) out.push_back(n);
  }
  return out;
}

class PoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root (loop devices, mounts, btrfs)";
    char tmpl[] = "/var/tmp/space-pool-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }

  void TearDown() override {
    if (dir_.empty()) return;
    pool_.reset();
    std::string pool_dir = Config().data_dir + "/pool";
    Result<std::vector<std::string>> roots = ListDir(pool_dir + "/sandboxes");
    for (const auto& id : roots.ok() ? *roots : std::vector<std::string>{}) {
      ::umount2((pool_dir + "/sandboxes/" + id + "/merged").c_str(), MNT_DETACH);
    }
    while (::umount2(pool_dir.c_str(), 0) == 0) {
    }
    EXPECT_EQ(MountCount(pool_dir), 0);
    EXPECT_TRUE(RemoveTree(dir_).ok());
    // AUTOCLEAR detaches the loop device on the final unmount.
    EXPECT_EQ(LoopsBackedBy(dir_), std::vector<std::string>{});
  }

  PoolConfig Config(bool overlay = false) const {
    PoolConfig c;
    c.data_dir = dir_ + "/data";
    c.loop_image_bytes = kImageBytes;
    c.force_overlay = overlay;
    return c;
  }

  Pool& Open(bool overlay = false) {
    Result<std::unique_ptr<Pool>> p = Pool::Open(Config(overlay));
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    if (p.ok()) pool_ = std::move(*p);
    return *pool_;
  }

  TemplateInfo Busybox() {
    Result<TemplateInfo> t = pool_->EnsureTemplate("busybox", nullptr);
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    return t.ok() ? *t : TemplateInfo{};
  }

  std::string dir_;
  std::unique_ptr<Pool> pool_;
};

inline std::string ReadLink(const std::string& p) {
  char buf[256];
  ssize_t n = ::readlink(p.c_str(), buf, sizeof buf);
  return n < 0 ? "" : std::string(buf, static_cast<size_t>(n));
}

// Writes up to `max_bytes` in 1 MiB chunks with periodic fsync; returns the errno that
// stopped it (0: all written) and the bytes written.
inline std::pair<int, uint64_t> FillFile(const std::string& path, uint64_t max_bytes) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return {errno, 0};
  UniqueFd file(fd);
  std::string chunk(1 << 20, 'q');
  uint64_t written = 0;
  while (written < max_bytes) {
    for (size_t i = 0; i < chunk.size(); i += 4096) chunk[i] = static_cast<char>(written >> 20);  // no dedup
    Status st = WriteAll(file.get(), chunk);
    if (!st.ok()) return {errno, written};
    written += chunk.size();
    if ((written & ((8 << 20) - 1)) == 0 && ::fsync(file.get()) != 0) return {errno, written};
  }
  if (::fsync(file.get()) != 0) return {errno, written};
  return {0, written};
}

}  // namespace space::storage
