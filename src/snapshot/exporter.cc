#include "snapshot/exporter.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <unordered_map>
#include <unordered_set>

#include "common/clock.h"
#include "common/syscall.h"
#include "snapshot/chunk_codec.h"
#include "snapshot/dir_util.h"
#include "snapshot/manifest.h"

namespace space::snapshot {
namespace {

int64_t MtimeNs(const struct stat& st) {
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}

ManifestEntry EntryFromStat(const std::string& rel, EntryType type, const struct stat& st) {
  ManifestEntry e;
  e.path = rel;
  e.type = type;
  e.mode = static_cast<uint32_t>(st.st_mode & 07777);
  e.uid = st.st_uid;
  e.gid = st.st_gid;
  e.mtime_ns = MtimeNs(st);
  e.ctime_ns = static_cast<int64_t>(st.st_ctim.tv_sec) * 1000000000 + st.st_ctim.tv_nsec;
  return e;
}

std::string JoinRel(const std::string& dir, const std::string& name) { return dir == "." ? name : dir + "/" + name; }

// One export run: walks the tree depth-first in byte-sorted name order, appending entries.
class TreeExporter {
 public:
  TreeExporter(BlobStore& store, const ExportOptions& options, const Manifest* parent)
      : store_(store), options_(options), compressor_(options.zstd_level) {
    if (parent == nullptr) return;
    for (const ManifestEntry& e : parent->entries) {
      if (e.type == EntryType::kFile) parent_files_.emplace(e.path, &e);
    }
  }

  Status ExportRoot(int root_fd, const std::string& tree_dir) {
    struct stat st;
    if (::fstat(root_fd, &st) != 0) return ErrnoStatus("fstat", tree_dir, errno);
    entries_.push_back(EntryFromStat(".", EntryType::kDir, st));
    ++stats_.dirs;
    root_dir_ = tree_dir;
    return WalkDir(root_fd, ".");
  }

  std::vector<ManifestEntry> TakeEntries() { return std::move(entries_); }
  ExportStats& stats() { return stats_; }

 private:
  std::string Where(const std::string& rel) const { return root_dir_ + "/" + rel; }

  Status WalkDir(int dir_fd, const std::string& rel) {
    ASSIGN_OR_RETURN(std::vector<std::string> names, ListDirAt(dir_fd, Where(rel)));
    for (const std::string& name : names) {
      std::string child = JoinRel(rel, name);
      struct stat st;
      if (::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
        return ErrnoStatus("fstatat", Where(child), errno);
      }
      if (S_ISDIR(st.st_mode)) {
        entries_.push_back(EntryFromStat(child, EntryType::kDir, st));
        ++stats_.dirs;
        ASSIGN_OR_RETURN(UniqueFd sub, OpenDirAt(dir_fd, name, Where(child)));
        RETURN_IF_ERROR(WalkDir(sub.get(), child));
      } else if (S_ISREG(st.st_mode)) {
        RETURN_IF_ERROR(ExportFile(dir_fd, name, child, st));
      } else if (S_ISLNK(st.st_mode)) {
        RETURN_IF_ERROR(ExportSymlink(dir_fd, name, child, st));
      } else {
        ++stats_.skipped_special;
      }
    }
    return Status::Ok();
  }

  Status ExportSymlink(int dir_fd, const std::string& name, const std::string& rel, const struct stat& st) {
    ManifestEntry e = EntryFromStat(rel, EntryType::kSymlink, st);
    // st_size is the target length; one extra byte detects a target that grew meanwhile.
    e.target.resize(static_cast<size_t>(st.st_size) + 1);
    ssize_t n = ::readlinkat(dir_fd, name.c_str(), e.target.data(), e.target.size());
    if (n < 0) return ErrnoStatus("readlinkat", Where(rel), errno);
    if (static_cast<size_t>(n) == e.target.size()) {
      return Unavailable("symlink " + Where(rel) + " changed during export");
    }
    e.target.resize(static_cast<size_t>(n));
    e.size = e.target.size();
    entries_.push_back(std::move(e));
    ++stats_.symlinks;
    return Status::Ok();
  }

  Status ExportFile(int dir_fd, const std::string& name, const std::string& rel, const struct stat& lst) {
    ManifestEntry e = EntryFromStat(rel, EntryType::kFile, lst);
    e.size = static_cast<uint64_t>(lst.st_size);
    auto prev = parent_files_.find(rel);
    if (prev != parent_files_.end() && prev->second->size == e.size && prev->second->mtime_ns == e.mtime_ns &&
        prev->second->ctime_ns == e.ctime_ns &&
        prev->second->mode == e.mode && prev->second->uid == e.uid && prev->second->gid == e.gid) {
      e.chunks = prev->second->chunks;
      ++stats_.files_reused;
    } else {
      RETURN_IF_ERROR(ReadChunks(dir_fd, name, lst, e));
    }
    stats_.bytes_total += e.size;
    ++stats_.files;
    entries_.push_back(std::move(e));
    if (options_.progress) options_.progress(stats_);
    return Status::Ok();
  }

  Status ReadChunks(int dir_fd, const std::string& name, const struct stat& lst, ManifestEntry& e) {
    const std::string what = Where(e.path);
    // O_NONBLOCK: if the name was swapped for a fifo since fstatat, open must not hang.
    int raw = RetryEintr(
        [&] { return ::openat(dir_fd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC); });
    if (raw < 0) return ErrnoStatus("openat", what, errno);
    UniqueFd fd(raw);
    struct stat st;
    if (::fstat(fd.get(), &st) != 0) return ErrnoStatus("fstat", what, errno);
    if (!S_ISREG(st.st_mode) || st.st_ino != lst.st_ino || st.st_dev != lst.st_dev) {
      return Unavailable("file " + what + " changed during export");
    }
    for (uint64_t off = 0; off < e.size; off += kChunkSize) {
      size_t len = static_cast<size_t>(std::min<uint64_t>(kChunkSize, e.size - off));
      if (len == kChunkSize && IsHole(fd.get(), off, len) && !ZeroChunkHex().empty()) {
        // Nothing stored there: the zero chunk, without reading (or hashing) 4 MiB of zeros.
        if (known_.count(ZeroChunkHex()) == 0) buf_.assign(len, '\0');
        RETURN_IF_ERROR(StoreChunk(ZeroChunkHex()));
        e.chunks.push_back(ZeroChunkHex());
        continue;
      }
      buf_.resize(len);
      if (::lseek(fd.get(), static_cast<off_t>(off), SEEK_SET) < 0) return ErrnoStatus("lseek", what, errno);
      Status st_read = ReadExact(fd.get(), buf_.data(), len);
      if (!st_read.ok()) {
        if (st_read.code() == StatusCode::kUnavailable) return Unavailable("file " + what + " shrank during export");
        return st_read.Annotate(what);
      }
      stats_.bytes_read += len;
      ASSIGN_OR_RETURN(std::string hex, Sha256Hex(buf_));
      RETURN_IF_ERROR(StoreChunk(hex));
      e.chunks.push_back(std::move(hex));
    }
    return Status::Ok();
  }

  // Whether [off, off+len) of the file holds no data (a hole of a sparse file). A filesystem
  // without SEEK_DATA says every offset is data, which is only slower.
  static bool IsHole(int fd, uint64_t off, size_t len) {
    off_t data = ::lseek(fd, static_cast<off_t>(off), SEEK_DATA);
    if (data < 0) return errno == ENXIO;  // no data from `off` to the end
    return static_cast<uint64_t>(data) >= off + len;
  }

  // Puts the chunk in buf_ as object `hex` unless the store already has it.
  Status StoreChunk(const std::string& hex) {
    if (known_.count(hex) != 0) return Status::Ok();
    const std::string key = ObjectKey(hex);
    ASSIGN_OR_RETURN(bool exists, store_.Exists(key));
    if (!exists) {
      if (options_.fault) RETURN_IF_ERROR(options_.fault("object " + hex));
      ASSIGN_OR_RETURN(std::string object, compressor_.Compress(buf_));
      RETURN_IF_ERROR(store_.Put(key, object));
      ++stats_.objects_written;
      stats_.bytes_written += object.size();
    }
    known_.insert(hex);
    return Status::Ok();
  }

  BlobStore& store_;
  const ExportOptions& options_;
  Compressor compressor_;
  std::string root_dir_;
  std::unordered_map<std::string, const ManifestEntry*> parent_files_;  // into the parent manifest
  std::unordered_set<std::string> known_;  // objects this run wrote or saw in the store
  std::vector<ManifestEntry> entries_;
  std::string buf_;  // one chunk; reused to avoid a 4 MiB allocation per chunk
  ExportStats stats_;
};

// Export's body, for a root already open; `label` names the tree in errors.
Result<ExportStats> ExportOpened(int root_fd, const std::string& label, const std::string& snap_id,
                                 const std::string& parent_id, BlobStore& store, const ExportOptions& options) {
  const int64_t start_ns = MonoNowNs();
  RETURN_IF_ERROR(ValidateSnapId(snap_id));
  if (parent_id == snap_id) return InvalidArgument("snapshot " + snap_id + " cannot be its own parent");
  ASSIGN_OR_RETURN(bool exists, store.Exists(ManifestKey(snap_id)));
  if (exists) return Conflict("snapshot " + snap_id + " already exists");

  Manifest parent;
  if (!parent_id.empty()) {
    Result<Manifest> loaded = LoadManifest(store, parent_id);
    if (!loaded.ok()) return loaded.status().Annotate("parent snapshot " + parent_id);
    parent = std::move(loaded).value();
  }

  TreeExporter exporter(store, options, parent_id.empty() ? nullptr : &parent);
  RETURN_IF_ERROR(exporter.ExportRoot(root_fd, label));

  ExportStats& stats = exporter.stats();
  Manifest m;
  m.snap_id = snap_id;
  m.parent = parent_id;
  m.created_at_ms = WallNowMs();
  m.entries = exporter.TakeEntries();
  m.total_bytes = stats.bytes_total;
  m.stored_bytes = stats.bytes_written;
  // Our own output is held to the same rules as a loaded manifest (e.g. a path longer than
  // PATH_MAX in a deep tree), so we never publish a snapshot that could not be restored.
  RETURN_IF_ERROR(ValidateManifest(m).Annotate("export " + snap_id));
  if (options.fault) RETURN_IF_ERROR(options.fault("manifest"));
  // Last, after every object Put above returned (each durable): the commit point.
  RETURN_IF_ERROR(store.Put(ManifestKey(snap_id), SerializeManifest(m)));
  stats.duration_ms = (MonoNowNs() - start_ns) / 1000000;
  return stats;
}

}  // namespace

Result<ExportStats> Export(const std::string& tree_dir, const std::string& snap_id, const std::string& parent_id,
                           BlobStore& store, const ExportOptions& options) {
  ASSIGN_OR_RETURN(UniqueFd root, OpenFd(tree_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW));
  return ExportOpened(root.get(), tree_dir, snap_id, parent_id, store, options);
}

Result<ExportStats> ExportAt(int root_fd, const std::string& snap_id, const std::string& parent_id, BlobStore& store,
                             const ExportOptions& options) {
  return ExportOpened(root_fd, "the tree of " + snap_id, snap_id, parent_id, store, options);
}

}  // namespace space::snapshot
