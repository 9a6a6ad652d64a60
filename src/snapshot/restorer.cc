#include "snapshot/restorer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <vector>

#include "common/syscall.h"
#include "snapshot/chunk_codec.h"
#include "snapshot/dir_util.h"
#include "snapshot/manifest.h"

namespace space::snapshot {
namespace {

std::string ParentOf(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

std::string BaseName(const std::string& path) { return path.substr(path.rfind('/') + 1); }

struct timespec ToTimespec(int64_t ns) {
  struct timespec ts;
  ts.tv_sec = static_cast<time_t>(ns / 1000000000);
  ts.tv_nsec = static_cast<long>(ns % 1000000000);
  if (ts.tv_nsec < 0) {  // Before 1970: tv_nsec must stay in [0, 1e9).
    ts.tv_nsec += 1000000000;
    ts.tv_sec -= 1;
  }
  return ts;
}

// The chain of open directories from the destination root down to the last one used.
// Manifests list entries depth-first, so consecutive entries mostly share this chain and
// each directory is opened once; every step down is O_NOFOLLOW|O_DIRECTORY.
class DirCursor {
 public:
  DirCursor(UniqueFd root, std::string root_path) : root_path_(std::move(root_path)) {
    chain_.push_back({".", std::move(root)});
  }

  Result<int> Open(const std::string& dir) {
    while (chain_.size() > 1 && !IsWithin(dir, chain_.back().path)) chain_.pop_back();
    const std::string& base = chain_.back().path;
    std::string rest = base == "." ? (dir == "." ? "" : dir) : dir.substr(base.size());
    size_t pos = 0;
    while (pos < rest.size()) {
      if (rest[pos] == '/') ++pos;
      size_t end = rest.find('/', pos);
      if (end == std::string::npos) end = rest.size();
      std::string name = rest.substr(pos, end - pos);
      std::string path = chain_.back().path == "." ? name : chain_.back().path + "/" + name;
      ASSIGN_OR_RETURN(UniqueFd fd, OpenDirAt(chain_.back().fd.get(), name, root_path_ + "/" + path));
      chain_.push_back({std::move(path), std::move(fd)});
      pos = end;
    }
    return chain_.back().fd.get();
  }

 private:
  struct Link {
    std::string path;
    UniqueFd fd;
  };
  static bool IsWithin(const std::string& dir, const std::string& base) {
    return dir == base ||
           (dir.size() > base.size() && dir.compare(0, base.size(), base) == 0 && dir[base.size()] == '/');
  }

  std::string root_path_;
  std::vector<Link> chain_;
};

class TreeRestorer {
 public:
  TreeRestorer(BlobStore& store, const RestoreOptions& options, const std::string& dest, UniqueFd root)
      : store_(store), options_(options), dest_(dest), cursor_(std::move(root), dest) {}

  Status Run(const Manifest& m) {
    for (size_t i = 1; i < m.entries.size(); ++i) {
      const ManifestEntry& e = m.entries[i];
      ASSIGN_OR_RETURN(int parent_fd, cursor_.Open(ParentOf(e.path)));
      switch (e.type) {
        case EntryType::kDir:
          if (::mkdirat(parent_fd, BaseName(e.path).c_str(), 0700) != 0) return ErrnoStatus("mkdirat", Where(e), errno);
          break;
        case EntryType::kFile:
          RETURN_IF_ERROR(RestoreFile(parent_fd, e));
          break;
        case EntryType::kSymlink:
          RETURN_IF_ERROR(RestoreSymlink(parent_fd, e));
          break;
      }
    }
    // Children before parents: reverse manifest order (parents always come first in it).
    for (size_t i = m.entries.size(); i-- > 0;) {
      const ManifestEntry& e = m.entries[i];
      if (e.type != EntryType::kDir) continue;
      ASSIGN_OR_RETURN(int fd, cursor_.Open(e.path));
      RETURN_IF_ERROR(ApplyAttrs(fd, e));
    }
    return Status::Ok();
  }

 private:
  std::string Where(const ManifestEntry& e) const { return e.path == "." ? dest_ : dest_ + "/" + e.path; }

  uint32_t Owner(uint32_t id) const { return id < options_.owner_id_limit ? id : kOverflowOwner; }

  // chown first: it clears setuid/setgid bits, which chmod then sets.
  Status ApplyAttrs(int fd, const ManifestEntry& e) {
    if (options_.preserve_owner && ::fchown(fd, Owner(e.uid), Owner(e.gid)) != 0) {
      return ErrnoStatus("fchown", Where(e), errno);
    }
    if (::fchmod(fd, e.mode) != 0) return ErrnoStatus("fchmod", Where(e), errno);
    struct timespec times[2] = {ToTimespec(e.mtime_ns), ToTimespec(e.mtime_ns)};
    if (::futimens(fd, times) != 0) return ErrnoStatus("futimens", Where(e), errno);
    return Status::Ok();
  }

  Status RestoreFile(int parent_fd, const ManifestEntry& e) {
    std::string name = BaseName(e.path);
    int raw = RetryEintr([&] {
      return ::openat(parent_fd, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    });
    if (raw < 0) return ErrnoStatus("openat", Where(e), errno);
    UniqueFd fd(raw);
    Status st = WriteChunks(fd.get(), e);
    if (st.ok()) st = ApplyAttrs(fd.get(), e);
    // A file cut short by a missing or corrupt object must not stay behind looking whole.
    if (!st.ok()) ::unlinkat(parent_fd, name.c_str(), 0);
    return st;
  }

  Status WriteChunks(int fd, const ManifestEntry& e) {
    for (size_t i = 0; i < e.chunks.size(); ++i) {
      const std::string& hex = e.chunks[i];
      size_t expected = static_cast<size_t>(std::min<uint64_t>(kChunkSize, e.size - i * kChunkSize));
      if (expected == kChunkSize && hex == ZeroChunkHex()) {
        // Its key says it is zeros: a hole, neither fetched nor written (the size is set below).
        if (::lseek(fd, static_cast<off_t>(kChunkSize), SEEK_CUR) < 0) return ErrnoStatus("lseek", Where(e), errno);
        continue;
      }
      Result<std::string> object = store_.Get(ObjectKey(hex), MaxObjectSize());
      if (!object.ok()) {
        if (object.status().code() == StatusCode::kNotFound) return Internal("object " + hex + " missing");
        if (object.status().code() == StatusCode::kPayloadTooLarge) return Internal("object " + hex + " corrupt");
        return object.status();
      }
      if (!decompressor_.DecompressExact(*object, expected, raw_).ok()) return Internal("object " + hex + " corrupt");
      ASSIGN_OR_RETURN(std::string actual, Sha256Hex(raw_));
      if (actual != hex) return Internal("object " + hex + " corrupt");
      RETURN_IF_ERROR(WriteAll(fd, raw_).Annotate(Where(e)));
    }
    // A file that ends in holes gets its length here.
    if (::ftruncate(fd, static_cast<off_t>(e.size)) != 0) return ErrnoStatus("ftruncate", Where(e), errno);
    return Status::Ok();
  }

  Status RestoreSymlink(int parent_fd, const ManifestEntry& e) {
    std::string name = BaseName(e.path);
    if (::symlinkat(e.target.c_str(), parent_fd, name.c_str()) != 0) return ErrnoStatus("symlinkat", Where(e), errno);
    if (options_.preserve_owner &&
        ::fchownat(parent_fd, name.c_str(), Owner(e.uid), Owner(e.gid), AT_SYMLINK_NOFOLLOW) != 0) {
      return ErrnoStatus("fchownat", Where(e), errno);
    }
    struct timespec times[2] = {ToTimespec(e.mtime_ns), ToTimespec(e.mtime_ns)};
    if (::utimensat(parent_fd, name.c_str(), times, AT_SYMLINK_NOFOLLOW) != 0) {
      return ErrnoStatus("utimensat", Where(e), errno);
    }
    return Status::Ok();
  }

  BlobStore& store_;
  const RestoreOptions& options_;
  std::string dest_;
  DirCursor cursor_;
  Decompressor decompressor_;
  std::string raw_;  // one decompressed chunk, reused
};

}  // namespace

Status Restore(const std::string& snap_id, BlobStore& store, const std::string& dest_dir,
               const RestoreOptions& options) {
  ASSIGN_OR_RETURN(Manifest m, LoadManifest(store, snap_id));
  ASSIGN_OR_RETURN(UniqueFd root, OpenFd(dest_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW));
  TreeRestorer restorer(store, options, dest_dir, std::move(root));
  return restorer.Run(m).Annotate("restore " + snap_id);
}

Status RestoreAt(const std::string& snap_id, BlobStore& store, int dest_fd, const RestoreOptions& options) {
  ASSIGN_OR_RETURN(Manifest m, LoadManifest(store, snap_id));
  int dup = ::fcntl(dest_fd, F_DUPFD_CLOEXEC, 0);
  if (dup < 0) return ErrnoStatus("fcntl", "F_DUPFD_CLOEXEC", errno);
  TreeRestorer restorer(store, options, "the tree of " + snap_id, UniqueFd(dup));
  return restorer.Run(m).Annotate("restore " + snap_id);
}

}  // namespace space::snapshot
