#include "storage/diff.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <cstring>
#include <memory>

#include "common/syscall.h"
#include "storage/fs_util.h"

namespace space::storage {
namespace {

constexpr size_t kChunkBytes = 64 << 10;

// Every open of a name inside a tree: one component, relative to its directory's fd, never
// a symlink. O_NONBLOCK: a fifo swapped in for a file between lstat and open must not block
// the walk (the trees may be live roots).
Result<UniqueFd> OpenAt(int dir_fd, const std::string& name, int flags, const std::string& path) {
  int fd = ::openat(dir_fd, name.c_str(), flags | O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) return ErrnoStatus("openat", path, errno);
  return UniqueFd(fd);
}

Result<struct stat> LstatAt(int dir_fd, const std::string& name, const std::string& path) {
  struct stat st;
  if (::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return ErrnoStatus("fstatat", path, errno);
  return st;
}

Result<std::string> ReadLinkAt(int dir_fd, const std::string& name, const std::string& path) {
  char buf[PATH_MAX];
  ssize_t n = ::readlinkat(dir_fd, name.c_str(), buf, sizeof buf);
  if (n < 0) return ErrnoStatus("readlinkat", path, errno);
  return std::string(buf, static_cast<size_t>(n));
}

bool SameTime(const struct timespec& x, const struct timespec& y) {
  return x.tv_sec == y.tv_sec && x.tv_nsec == y.tv_nsec;
}

// Reads up to `len` bytes, short only at end of file.
Result<size_t> ReadFull(int fd, char* buf, size_t len, const std::string& path) {
  size_t got = 0;
  while (got < len) {
    ssize_t n = RetryEintr([&] { return ::read(fd, buf + got, len - got); });
    if (n < 0) return ErrnoStatus("read", path, errno);
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  return got;
}

Result<bool> SameContent(int a_dir, int b_dir, const std::string& name, const std::string& path) {
  ASSIGN_OR_RETURN(UniqueFd a, OpenAt(a_dir, name, 0, path));
  ASSIGN_OR_RETURN(UniqueFd b, OpenAt(b_dir, name, 0, path));
  struct stat sa, sb;
  if (::fstat(a.get(), &sa) != 0 || ::fstat(b.get(), &sb) != 0) return ErrnoStatus("fstat", path, errno);
  if (!S_ISREG(sa.st_mode) || !S_ISREG(sb.st_mode)) return false;  // replaced since the lstat
  auto buf_a = std::make_unique<char[]>(kChunkBytes);
  auto buf_b = std::make_unique<char[]>(kChunkBytes);
  for (;;) {
    ASSIGN_OR_RETURN(size_t na, ReadFull(a.get(), buf_a.get(), kChunkBytes, path));
    ASSIGN_OR_RETURN(size_t nb, ReadFull(b.get(), buf_b.get(), kChunkBytes, path));
    if (na != nb || std::memcmp(buf_a.get(), buf_b.get(), na) != 0) return false;
    if (na < kChunkBytes) return true;
  }
}

// One comparison: the output lists and the entry budget shared by the whole walk.
class Differ {
 public:
  explicit Differ(size_t max_entries) : max_entries_(max_entries) {}

  TreeDiff& diff() { return diff_; }
  bool full() const { return diff_.truncated; }

  // Records one path; false (and truncated) once the budget is spent.
  bool Emit(std::vector<std::string>& list, const std::string& path) {
    if (count_ >= max_entries_) {
      diff_.truncated = true;
      return false;
    }
    list.push_back(path);
    ++count_;
    return true;
  }

  // Records everything below directory `dir_fd` (at `rel`) into `list`.
  Status EmitBelow(int dir_fd, const std::string& rel, std::vector<std::string>& list) {
    ASSIGN_OR_RETURN(std::vector<std::string> names, ListDirAt(dir_fd, rel.empty() ? "/" : rel));
    for (const auto& n : names) {
      std::string path = rel + "/" + n;
      if (!Emit(list, path)) return Status::Ok();
      ASSIGN_OR_RETURN(struct stat st, LstatAt(dir_fd, n, path));
      if (!S_ISDIR(st.st_mode)) continue;
      ASSIGN_OR_RETURN(UniqueFd sub, OpenAt(dir_fd, n, O_DIRECTORY, path));
      RETURN_IF_ERROR(EmitBelow(sub.get(), path, list));
      if (full()) return Status::Ok();
    }
    return Status::Ok();
  }

  // Records an entry present on one side only, with its subtree.
  Status EmitOneSided(int dir_fd, const std::string& name, const std::string& path, std::vector<std::string>& list) {
    if (!Emit(list, path)) return Status::Ok();
    ASSIGN_OR_RETURN(struct stat st, LstatAt(dir_fd, name, path));
    if (!S_ISDIR(st.st_mode)) return Status::Ok();
    ASSIGN_OR_RETURN(UniqueFd sub, OpenAt(dir_fd, name, O_DIRECTORY, path));
    return EmitBelow(sub.get(), path, list);
  }

  Status DiffDirs(int a_fd, int b_fd, const std::string& rel) {
    const std::string what = rel.empty() ? "/" : rel;
    ASSIGN_OR_RETURN(std::vector<std::string> as, ListDirAt(a_fd, what));
    ASSIGN_OR_RETURN(std::vector<std::string> bs, ListDirAt(b_fd, what));
    size_t i = 0, j = 0;
    while ((i < as.size() || j < bs.size()) && !full()) {
      if (j == bs.size() || (i < as.size() && as[i] < bs[j])) {
        RETURN_IF_ERROR(EmitOneSided(a_fd, as[i], rel + "/" + as[i], diff_.removed));
        ++i;
      } else if (i == as.size() || bs[j] < as[i]) {
        RETURN_IF_ERROR(EmitOneSided(b_fd, bs[j], rel + "/" + bs[j], diff_.added));
        ++j;
      } else {
        RETURN_IF_ERROR(DiffEntry(a_fd, b_fd, as[i], rel + "/" + as[i]));
        ++i;
        ++j;
      }
    }
    return Status::Ok();
  }

 private:
  Status DiffEntry(int a_dir, int b_dir, const std::string& name, const std::string& path) {
    ASSIGN_OR_RETURN(struct stat sa, LstatAt(a_dir, name, path));
    ASSIGN_OR_RETURN(struct stat sb, LstatAt(b_dir, name, path));
    bool a_is_dir = S_ISDIR(sa.st_mode), b_is_dir = S_ISDIR(sb.st_mode);
    if ((sa.st_mode & S_IFMT) != (sb.st_mode & S_IFMT)) {
      if (!Emit(diff_.changed, path)) return Status::Ok();
      if (a_is_dir) {
        ASSIGN_OR_RETURN(UniqueFd sub, OpenAt(a_dir, name, O_DIRECTORY, path));
        RETURN_IF_ERROR(EmitBelow(sub.get(), path, diff_.removed));
      }
      if (b_is_dir) {
        ASSIGN_OR_RETURN(UniqueFd sub, OpenAt(b_dir, name, O_DIRECTORY, path));
        RETURN_IF_ERROR(EmitBelow(sub.get(), path, diff_.added));
      }
      return Status::Ok();
    }
    if (a_is_dir) {
      if (!SameOwnerAndMode(sa, sb) && !Emit(diff_.changed, path)) return Status::Ok();
      ASSIGN_OR_RETURN(UniqueFd sub_a, OpenAt(a_dir, name, O_DIRECTORY, path));
      ASSIGN_OR_RETURN(UniqueFd sub_b, OpenAt(b_dir, name, O_DIRECTORY, path));
      return DiffDirs(sub_a.get(), sub_b.get(), path);
    }
    ASSIGN_OR_RETURN(bool same, SameNonDir(a_dir, b_dir, name, path, sa, sb));
    if (!same) Emit(diff_.changed, path);
    return Status::Ok();
  }

  static bool SameOwnerAndMode(const struct stat& a, const struct stat& b) {
    return a.st_mode == b.st_mode && a.st_uid == b.st_uid && a.st_gid == b.st_gid;
  }

  // Same type known; see DiffTrees for the rule.
  static Result<bool> SameNonDir(int a_dir, int b_dir, const std::string& name, const std::string& path,
                                 const struct stat& sa, const struct stat& sb) {
    if (!SameOwnerAndMode(sa, sb) || sa.st_size != sb.st_size) return false;
    if (S_ISCHR(sa.st_mode) || S_ISBLK(sa.st_mode)) return sa.st_rdev == sb.st_rdev;
    if (S_ISLNK(sa.st_mode)) {
      ASSIGN_OR_RETURN(std::string ta, ReadLinkAt(a_dir, name, path));
      ASSIGN_OR_RETURN(std::string tb, ReadLinkAt(b_dir, name, path));
      return ta == tb;
    }
    if (!S_ISREG(sa.st_mode)) return true;  // fifo, socket: no content
    if (sa.st_ino == sb.st_ino && SameTime(sa.st_mtim, sb.st_mtim) && SameTime(sa.st_ctim, sb.st_ctim)) return true;
    return SameContent(a_dir, b_dir, name, path);
  }

  const size_t max_entries_;
  size_t count_ = 0;
  TreeDiff diff_;
};

Result<UniqueFd> OpenRoot(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus("open", path, errno);
  return UniqueFd(fd);
}

}  // namespace

Result<TreeDiff> DiffTrees(const std::string& a, const std::string& b, size_t max_entries) {
  ASSIGN_OR_RETURN(UniqueFd a_fd, OpenRoot(a));
  ASSIGN_OR_RETURN(UniqueFd b_fd, OpenRoot(b));
  return DiffTreesAt(a_fd.get(), b_fd.get(), max_entries);
}

Result<TreeDiff> DiffTreesAt(int a_fd, int b_fd, size_t max_entries) {
  struct stat sa, sb;
  if (::fstat(a_fd, &sa) != 0) return ErrnoStatus("fstat", "tree a", errno);
  if (::fstat(b_fd, &sb) != 0) return ErrnoStatus("fstat", "tree b", errno);
  if (!S_ISDIR(sa.st_mode) || !S_ISDIR(sb.st_mode)) return InvalidArgument("diff: a tree's root is not a directory");
  Differ differ(max_entries);
  bool root_same = sa.st_mode == sb.st_mode && sa.st_uid == sb.st_uid && sa.st_gid == sb.st_gid;
  if (root_same || differ.Emit(differ.diff().changed, "/")) {
    RETURN_IF_ERROR(differ.DiffDirs(a_fd, b_fd, ""));
  }
  return std::move(differ.diff());
}

}  // namespace space::storage
