// Helpers for the snapshot tests: temp directories, seeded random content, and a tree
// fingerprint that compares two trees byte for byte (never following symlinks).
#pragma once

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>

#include <gtest/gtest.h>

namespace space::snapshot::testing {

namespace fs = std::filesystem;

// A fresh directory under $TMPDIR (or /tmp), removed with its contents on destruction.
class TempDir {
 public:
  TempDir() {
    const char* base = getenv("TMPDIR");
    std::string tmpl = std::string(base != nullptr ? base : "/tmp") + "/snapshot_test.XXXXXX";
    char* p = mkdtemp(tmpl.data());
    if (p == nullptr) ADD_FAILURE() << "mkdtemp failed";
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    // remove_all does not follow symlinks; restored trees may hold read-only dirs, so
    // make everything writable first (we run as root in CI, but not necessarily).
    for (auto it = fs::recursive_directory_iterator(path_, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec)) {
      if (it->is_directory(ec) && !it->is_symlink(ec)) ::chmod(it->path().c_str(), 0700);
    }
    fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string Sub(const std::string& rel) const { return path_ + "/" + rel; }

 private:
  std::string path_;
};

// Deterministic pseudo-random bytes (seeded, so failures reproduce).
inline std::string RandomBytes(std::mt19937_64& rng, size_t n) {
  std::string s(n, '\0');
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t v = rng();
    memcpy(&s[i], &v, 8);
  }
  for (; i < n; ++i) s[i] = static_cast<char>(rng());
  return s;
}

inline void WriteFile(const std::string& path, const std::string& data, mode_t mode = 0644) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
  out.close();
  ASSERT_TRUE(out.good()) << path;
  ASSERT_EQ(::chmod(path.c_str(), mode), 0) << path;
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Sets a file's mtime (so the exporter's change check sees or misses a change on purpose).
inline void SetMtime(const std::string& path, int64_t sec, long nsec) {
  struct timespec ts[2] = {{sec, nsec}, {sec, nsec}};
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), ts, AT_SYMLINK_NOFOLLOW), 0) << path;
}

// path -> "type mode uid gid mtime_ns <content or target>"; directory mtimes included.
inline std::map<std::string, std::string> Fingerprint(const std::string& root, bool with_owner) {
  std::map<std::string, std::string> out;
  auto describe = [&](const std::string& abs, const std::string& rel) {
    struct stat st;
    if (::lstat(abs.c_str(), &st) != 0) {
      out[rel] = "lstat failed";
      return;
    }
    std::string d = std::to_string(st.st_mode) + " ";
    if (with_owner) d += std::to_string(st.st_uid) + ":" + std::to_string(st.st_gid) + " ";
    if (!S_ISLNK(st.st_mode)) {
      d += std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec) + " ";
    }
    if (S_ISREG(st.st_mode)) d += ReadFile(abs);
    if (S_ISLNK(st.st_mode)) d += fs::read_symlink(abs).string();
    out[rel] = std::move(d);
  };
  describe(root, ".");
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator(); ++it) {
    describe(it->path().string(), fs::relative(it->path(), root).string());
  }
  return out;
}

// Bytes under `dir` (sum of regular file sizes).
inline uint64_t DirBytes(const std::string& dir) {
  uint64_t total = 0;
  for (auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) total += e.file_size();
  }
  return total;
}

}  // namespace space::snapshot::testing
