#include "snapshot/local_blob_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/random.h"
#include "common/syscall.h"
#include "snapshot/dir_util.h"

namespace space::snapshot {
namespace {

constexpr std::string_view kTempPrefix = "tmp.";
const std::string kObjectsDir = "objects";
const std::string kManifestsDir = "manifests";
const std::string kTemplatesDir = "templates";

// The file name of `key` inside its directory (the part after the last '/').
std::string KeyBaseName(const std::string& key) { return key.substr(key.rfind('/') + 1); }

Status MkdirAtIfMissing(int parent_fd, const std::string& name, const std::string& what) {
  if (::mkdirat(parent_fd, name.c_str(), 0700) != 0 && errno != EEXIST) return ErrnoStatus("mkdirat", what, errno);
  return Status::Ok();
}

bool IsTwoHex(const std::string& s) {
  return s.size() == 2 && IsSha256Hex(s + std::string(62, '0'));
}

}  // namespace

Result<std::unique_ptr<LocalBlobStore>> LocalBlobStore::Open(const std::string& root) {
  RETURN_IF_ERROR(MakeDirs(root, 0700));
  ASSIGN_OR_RETURN(UniqueFd root_fd, OpenFd(root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW));
  RETURN_IF_ERROR(MkdirAtIfMissing(root_fd.get(), kObjectsDir, root + "/objects"));
  RETURN_IF_ERROR(MkdirAtIfMissing(root_fd.get(), kManifestsDir, root + "/manifests"));
  RETURN_IF_ERROR(MkdirAtIfMissing(root_fd.get(), kTemplatesDir, root + "/templates"));
  RETURN_IF_ERROR(FsyncDir(root_fd.get(), root));
  return std::unique_ptr<LocalBlobStore>(new LocalBlobStore(root, std::move(root_fd)));
}

Result<UniqueFd> LocalBlobStore::OpenKeyDir(const std::string& key, bool create) {
  if (SnapIdFromManifestKey(key).ok()) return OpenDirAt(root_fd_.get(), kManifestsDir, root_ + "/manifests");
  if (NameFromTemplateKey(key).ok()) return OpenDirAt(root_fd_.get(), kTemplatesDir, root_ + "/templates");
  ASSIGN_OR_RETURN(std::string hex, HashFromObjectKey(key));
  ASSIGN_OR_RETURN(UniqueFd objects, OpenDirAt(root_fd_.get(), kObjectsDir, root_ + "/objects"));
  std::string sub = hex.substr(0, 2);
  std::string what = root_ + "/objects/" + sub;
  Result<UniqueFd> dir = OpenDirAt(objects.get(), sub, what);
  if (dir.ok() || !create || dir.status().code() != StatusCode::kNotFound) return dir;
  RETURN_IF_ERROR(MkdirAtIfMissing(objects.get(), sub, what));
  // The new subdirectory's entry must be durable before any object inside it counts as such.
  RETURN_IF_ERROR(FsyncDir(objects.get(), root_ + "/objects"));
  return OpenDirAt(objects.get(), sub, what);
}

Status LocalBlobStore::Put(const std::string& key, std::string_view bytes) {
  RETURN_IF_ERROR(ValidateKey(key));
  ASSIGN_OR_RETURN(UniqueFd dir, OpenKeyDir(key, /*create=*/true));
  // The temp file lives in the key's own directory so the rename is atomic (same filesystem)
  // and a crash leaves it where RemoveStaleTemp looks.
  std::string tmp = std::string(kTempPrefix) + RandomHex(8);
  std::string what = root_ + "/" + key;
  int raw = RetryEintr([&] {
    return ::openat(dir.get(), tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  });
  if (raw < 0) return ErrnoStatus("openat", what + " (temp)", errno);
  UniqueFd fd(raw);
  Status st = WriteAll(fd.get(), bytes);
  if (st.ok() && RetryEintr([&] { return ::fsync(fd.get()); }) != 0) st = ErrnoStatus("fsync", what, errno);
  if (st.ok() && ::renameat(dir.get(), tmp.c_str(), dir.get(), KeyBaseName(key).c_str()) != 0) {
    st = ErrnoStatus("renameat", what, errno);
  }
  if (!st.ok()) {
    ::unlinkat(dir.get(), tmp.c_str(), 0);  // Best effort; RemoveStaleTemp catches leftovers.
    return st;
  }
  return FsyncDir(dir.get(), what);
}

Result<std::string> LocalBlobStore::Get(const std::string& key, size_t max_bytes) {
  RETURN_IF_ERROR(ValidateKey(key));
  std::string what = root_ + "/" + key;
  ASSIGN_OR_RETURN(UniqueFd dir, OpenKeyDir(key, /*create=*/false));
  int raw = RetryEintr(
      [&] { return ::openat(dir.get(), KeyBaseName(key).c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC); });
  if (raw < 0) return ErrnoStatus("openat", what, errno);
  UniqueFd fd(raw);
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return ErrnoStatus("fstat", what, errno);
  if (!S_ISREG(st.st_mode)) return Internal("get " + what + ": not a regular file");
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    return PayloadTooLarge("get " + what + ": larger than " + std::to_string(max_bytes) + " bytes");
  }
  std::string out(static_cast<size_t>(st.st_size), '\0');
  RETURN_IF_ERROR(ReadExact(fd.get(), out.data(), out.size()).Annotate("get " + what));
  return out;
}

Result<bool> LocalBlobStore::Exists(const std::string& key) {
  RETURN_IF_ERROR(ValidateKey(key));
  Result<UniqueFd> dir = OpenKeyDir(key, /*create=*/false);
  if (!dir.ok()) {
    if (dir.status().code() == StatusCode::kNotFound) return false;
    return dir.status();
  }
  struct stat st;
  if (::fstatat(dir->get(), KeyBaseName(key).c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) return false;
    return ErrnoStatus("fstatat", root_ + "/" + key, errno);
  }
  return true;
}

Status LocalBlobStore::Delete(const std::string& key) {
  RETURN_IF_ERROR(ValidateKey(key));
  Result<UniqueFd> dir = OpenKeyDir(key, /*create=*/false);
  if (!dir.ok()) return dir.status().code() == StatusCode::kNotFound ? Status::Ok() : dir.status();
  std::string what = root_ + "/" + key;
  if (::unlinkat(dir->get(), KeyBaseName(key).c_str(), 0) != 0) {
    if (errno == ENOENT) return Status::Ok();
    return ErrnoStatus("unlinkat", what, errno);
  }
  // Durable deletion matters for manifests (a deleted snapshot must not come back and then
  // reference collected objects); for objects it is cheap enough to keep one code path.
  return FsyncDir(dir->get(), what);
}

Result<std::vector<std::string>> LocalBlobStore::List(std::string_view prefix) {
  std::vector<std::string> keys;
  auto wanted = [&](std::string_view section) {
    return section.substr(0, prefix.size()) == prefix || prefix.substr(0, section.size()) == section;
  };
  auto add = [&](std::string key) {
    // Temp files and anything foreign in the directories are not keys.
    if (ValidateKey(key).ok() && key.compare(0, prefix.size(), prefix) == 0) keys.push_back(std::move(key));
  };
  if (wanted(kManifestsPrefix)) {
    ASSIGN_OR_RETURN(UniqueFd dir, OpenDirAt(root_fd_.get(), kManifestsDir, root_ + "/manifests"));
    ASSIGN_OR_RETURN(std::vector<std::string> names, ListDirAt(dir.get(), root_ + "/manifests"));
    for (auto& n : names) add(std::string(kManifestsPrefix) + n);
  }
  if (wanted(kTemplatesPrefix)) {
    ASSIGN_OR_RETURN(UniqueFd dir, OpenDirAt(root_fd_.get(), kTemplatesDir, root_ + "/templates"));
    ASSIGN_OR_RETURN(std::vector<std::string> names, ListDirAt(dir.get(), root_ + "/templates"));
    for (auto& n : names) add(std::string(kTemplatesPrefix) + n);
  }
  if (wanted(kObjectsPrefix)) {
    ASSIGN_OR_RETURN(UniqueFd objects, OpenDirAt(root_fd_.get(), kObjectsDir, root_ + "/objects"));
    ASSIGN_OR_RETURN(std::vector<std::string> subs, ListDirAt(objects.get(), root_ + "/objects"));
    for (const auto& sub : subs) {
      if (!IsTwoHex(sub)) continue;
      std::string key_dir = std::string(kObjectsPrefix) + sub + "/";
      if (prefix.size() > kObjectsPrefix.size() && !wanted(key_dir)) continue;
      ASSIGN_OR_RETURN(UniqueFd dir, OpenDirAt(objects.get(), sub, root_ + "/objects/" + sub));
      ASSIGN_OR_RETURN(std::vector<std::string> names, ListDirAt(dir.get(), root_ + "/objects/" + sub));
      for (auto& n : names) add(key_dir + n);
    }
  }
  return keys;
}

Result<uint64_t> LocalBlobStore::RemoveStaleTemp(int64_t older_than_ms) {
  const int64_t now_ms = WallNowMs();
  uint64_t removed = 0;
  auto sweep = [&](int dir_fd, const std::string& what) -> Status {
    ASSIGN_OR_RETURN(std::vector<std::string> names, ListDirAt(dir_fd, what));
    for (const auto& n : names) {
      if (n.compare(0, kTempPrefix.size(), kTempPrefix) != 0) continue;
      struct stat st;
      if (::fstatat(dir_fd, n.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
        if (errno == ENOENT) continue;  // Its Put finished (renamed) or failed meanwhile.
        return ErrnoStatus("fstatat", what + "/" + n, errno);
      }
      int64_t mtime_ms = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000 + st.st_mtim.tv_nsec / 1000000;
      // A young temp file may belong to a Put still running; only old ones are abandoned.
      if (now_ms - mtime_ms < older_than_ms) continue;
      if (::unlinkat(dir_fd, n.c_str(), 0) != 0 && errno != ENOENT) {
        return ErrnoStatus("unlinkat", what + "/" + n, errno);
      }
      ++removed;
    }
    return Status::Ok();
  };
  ASSIGN_OR_RETURN(UniqueFd manifests, OpenDirAt(root_fd_.get(), kManifestsDir, root_ + "/manifests"));
  RETURN_IF_ERROR(sweep(manifests.get(), root_ + "/manifests"));
  ASSIGN_OR_RETURN(UniqueFd templates, OpenDirAt(root_fd_.get(), kTemplatesDir, root_ + "/templates"));
  RETURN_IF_ERROR(sweep(templates.get(), root_ + "/templates"));
  ASSIGN_OR_RETURN(UniqueFd objects, OpenDirAt(root_fd_.get(), kObjectsDir, root_ + "/objects"));
  ASSIGN_OR_RETURN(std::vector<std::string> subs, ListDirAt(objects.get(), root_ + "/objects"));
  for (const auto& sub : subs) {
    if (!IsTwoHex(sub)) continue;
    ASSIGN_OR_RETURN(UniqueFd dir, OpenDirAt(objects.get(), sub, root_ + "/objects/" + sub));
    RETURN_IF_ERROR(sweep(dir.get(), root_ + "/objects/" + sub));
  }
  return removed;
}

}  // namespace space::snapshot
