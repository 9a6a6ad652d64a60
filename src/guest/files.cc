#include "guest/files.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <vector>

#include "common/clock.h"
#include "common/random.h"
#include "common/syscall.h"
#include "protocol/exec_request.h"
#include "protocol/json_util.h"

namespace space::guest {
namespace {

using nlohmann::json;

const json* Member(const json& obj, const char* key) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

Result<std::string> PathMember(const json& j, const char* key) {
  const json* v = Member(j, key);
  if (v == nullptr || !v->is_string() || !IsValidAbsolutePath(v->get_ref<const std::string&>())) {
    return InvalidArgument(std::string("file op: ") + key + " must be an absolute path of at most 4096 bytes");
  }
  return v->get<std::string>();
}

std::string_view TypeWord(mode_t m) {
  if (S_ISREG(m)) return "file";
  if (S_ISDIR(m)) return "dir";
  if (S_ISLNK(m)) return "symlink";
  return "other";
}

json EntryJson(const std::string& name, const std::string& path, const struct stat& st) {
  int64_t mtime_ms = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000 + st.st_mtim.tv_nsec / 1000000;
  return json{{"name", name},
              {"path", path},
              {"type", TypeWord(st.st_mode)},
              {"size", static_cast<uint64_t>(st.st_size)},
              {"mode", static_cast<unsigned>(st.st_mode & 07777)},
              {"mtime", FormatRfc3339(mtime_ms)},
              {"uid", static_cast<uint64_t>(st.st_uid)},
              {"gid", static_cast<uint64_t>(st.st_gid)}};
}

std::string JoinPath(const std::string& dir, const std::string& name) {
  return dir.back() == '/' ? dir + name : dir + "/" + name;
}

struct DirCloser {
  void operator()(DIR* d) const { ::closedir(d); }
};
using DirPtr = std::unique_ptr<DIR, DirCloser>;

// Names in the directory `fd` (which the call takes over), without "." and "..".
Result<std::vector<std::string>> ReadNames(UniqueFd fd, const std::string& display) {
  DirPtr dir(::fdopendir(fd.get()));
  if (!dir) return ErrnoStatus("fdopendir", display, errno);
  fd.release();  // owned by `dir` now
  std::vector<std::string> names;
  for (;;) {
    errno = 0;
    dirent* e = ::readdir(dir.get());
    if (e == nullptr) {
      if (errno != 0) return ErrnoStatus("readdir", display, errno);
      break;
    }
    std::string_view n = e->d_name;
    if (n == "." || n == "..") continue;
    names.emplace_back(n);
  }
  std::sort(names.begin(), names.end());
  return names;
}

Status ListInto(int dirfd, const std::string& dir_path, int depth, json& entries) {
  UniqueFd dup(::fcntl(dirfd, F_DUPFD_CLOEXEC, 0));
  if (!dup) return ErrnoStatus("dup", dir_path, errno);
  ASSIGN_OR_RETURN(std::vector<std::string> names, ReadNames(std::move(dup), dir_path));
  for (const std::string& name : names) {
    if (entries.size() >= kMaxListEntries) return Status::Ok();
    struct stat st;
    std::string path = JoinPath(dir_path, name);
    // Vanished since readdir: skip it rather than fail the whole listing.
    if (::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    entries.push_back(EntryJson(name, path, st));
    if (depth > 1 && S_ISDIR(st.st_mode)) {
      UniqueFd sub(RetryEintr(
          [&] { return ::openat(dirfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC); }));
      // An unreadable subdirectory is still listed itself; its contents are skipped.
      if (sub) RETURN_IF_ERROR(ListInto(sub.get(), path, depth - 1, entries));
    }
  }
  return Status::Ok();
}

// Removes `name` in `dirfd`, descending into directories without following symlinks.
Status RemoveAt(int dirfd, const std::string& name, const std::string& display, int depth) {
  if (::unlinkat(dirfd, name.c_str(), 0) == 0) return Status::Ok();
  int unlink_err = errno;
  // Linux answers EISDIR for a directory; POSIX allows EPERM.
  if (unlink_err != EISDIR && unlink_err != EPERM) return ErrnoStatus("unlink", display, unlink_err);
  if (depth > kMaxDeleteDepth) {
    return ResourceExhausted("delete " + display + ": tree deeper than " + std::to_string(kMaxDeleteDepth));
  }
  UniqueFd fd(RetryEintr(
      [&] { return ::openat(dirfd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC); }));
  if (!fd) {
    int e = errno;
    return ErrnoStatus(e == ENOTDIR ? "unlink" : "open", display, e == ENOTDIR ? unlink_err : e);
  }
  UniqueFd dup(::fcntl(fd.get(), F_DUPFD_CLOEXEC, 0));
  if (!dup) return ErrnoStatus("dup", display, errno);
  ASSIGN_OR_RETURN(std::vector<std::string> names, ReadNames(std::move(dup), display));
  for (const std::string& child : names) {
    RETURN_IF_ERROR(RemoveAt(fd.get(), child, JoinPath(display, child), depth + 1));
  }
  fd.reset();
  if (::unlinkat(dirfd, name.c_str(), AT_REMOVEDIR) != 0) return ErrnoStatus("rmdir", display, errno);
  return Status::Ok();
}

}  // namespace

std::pair<std::string, std::string> SplitParent(const std::string& path) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  size_t slash = p.rfind('/');
  if (slash == std::string::npos) return {".", p};
  if (p == "/") return {"/", ""};
  std::string parent = slash == 0 ? "/" : p.substr(0, slash);
  return {parent, p.substr(slash + 1)};
}

Result<FileOp> ParseFileOp(std::string_view payload) {
  ASSIGN_OR_RETURN(json j, ParseJsonObject(payload, "file op"));
  FileOp op;
  const json* kind = Member(j, "op");
  if (kind == nullptr || !kind->is_string()) return InvalidArgument("file op: op must be a string");
  static constexpr std::pair<std::string_view, FileOp::Kind> kKinds[] = {
      {"read", FileOp::Kind::kRead},   {"write", FileOp::Kind::kWrite}, {"list", FileOp::Kind::kList},
      {"stat", FileOp::Kind::kStat},   {"mkdir", FileOp::Kind::kMkdir}, {"move", FileOp::Kind::kMove},
      {"delete", FileOp::Kind::kDelete}};
  const std::string& word = kind->get_ref<const std::string&>();
  auto it = std::find_if(std::begin(kKinds), std::end(kKinds), [&](const auto& k) { return k.first == word; });
  if (it == std::end(kKinds)) return InvalidArgument("file op: unknown op \"" + word + "\"");
  op.kind = it->second;
  ASSIGN_OR_RETURN(op.path, PathMember(j, "path"));
  if (op.kind == FileOp::Kind::kMove) {
    ASSIGN_OR_RETURN(op.to, PathMember(j, "to"));
  }
  if (const json* mode = Member(j, "mode")) {
    if (!mode->is_number_unsigned() || mode->get<uint64_t>() > 07777) {
      return InvalidArgument("file op: mode must be an integer in 0..07777");
    }
    op.mode = static_cast<mode_t>(mode->get<uint64_t>());
  }
  if (const json* rec = Member(j, "recursive")) {
    if (!rec->is_boolean()) return InvalidArgument("file op: recursive must be a boolean");
    op.recursive = rec->get<bool>();
  }
  if (const json* owner = Member(j, "owner")) {
    if (!owner->is_string() || owner->get_ref<const std::string&>().empty() ||
        owner->get_ref<const std::string&>().size() > 32) {
      return InvalidArgument("file op: owner must be a user name or uid");
    }
    op.owner = owner->get<std::string>();
  }
  if (const json* depth = Member(j, "depth")) {
    if (!depth->is_number_unsigned() || depth->get<uint64_t>() < 1 || depth->get<uint64_t>() > kMaxListDepth) {
      return InvalidArgument("file op: depth must be an integer in 1..8");
    }
    op.depth = static_cast<int>(depth->get<uint64_t>());
  }
  return op;
}

Result<json> StatPath(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return ErrnoStatus("lstat", path, errno);
  auto [parent, name] = SplitParent(path);
  return EntryJson(name.empty() ? "/" : name, path, st);
}

Result<json> ListDirectory(const std::string& path, int depth) {
  UniqueFd fd(RetryEintr([&] { return ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); }));
  if (!fd) return ErrnoStatus("open", path, errno);
  json entries = json::array();
  RETURN_IF_ERROR(ListInto(fd.get(), path, std::clamp(depth, 1, kMaxListDepth), entries));
  return json{{"entries", std::move(entries)}};
}

Status MakeDirectory(const std::string& path, mode_t mode, const std::optional<Owner>& owner) {
  if (!owner) return MakeDirs(path, mode);
  // Component by component, so that exactly the directories created here change owner.
  std::string prefix;
  size_t i = 0;
  while (i < path.size()) {
    size_t j = path.find('/', i + 1);
    if (j == std::string::npos) j = path.size();
    prefix = path.substr(0, j);
    i = j;
    if (prefix == "/" || prefix.empty()) continue;
    if (::mkdir(prefix.c_str(), mode) == 0) {
      if (::lchown(prefix.c_str(), owner->uid, owner->gid) != 0) return ErrnoStatus("lchown", prefix, errno);
    } else if (errno != EEXIST) {
      return ErrnoStatus("mkdir", prefix, errno);
    }
  }
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return ErrnoStatus("stat", path, errno);
  if (!S_ISDIR(st.st_mode)) return ErrnoStatus("mkdir", path, ENOTDIR);
  return Status::Ok();
}

Status MovePath(const std::string& from, const std::string& to) {
  RETURN_IF_ERROR(MakeDirs(SplitParent(to).first, 0755));
  if (::rename(from.c_str(), to.c_str()) != 0) return ErrnoStatus("rename", from + " -> " + to, errno);
  return Status::Ok();
}

Status DeletePath(const std::string& path, bool recursive) {
  auto [parent, name] = SplitParent(path);
  if (name.empty()) return InvalidArgument("delete /: refusing to delete the root directory");
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return ErrnoStatus("lstat", path, errno);
  if (!S_ISDIR(st.st_mode)) {
    if (::unlink(path.c_str()) != 0) return ErrnoStatus("unlink", path, errno);
    return Status::Ok();
  }
  if (!recursive) {
    if (::rmdir(path.c_str()) != 0) return ErrnoStatus("rmdir", path, errno);
    return Status::Ok();
  }
  // A plain pointer: clang 14 cannot capture structured bindings in a lambda.
  const char* parent_path = parent.c_str();
  UniqueFd dir(RetryEintr([&] { return ::open(parent_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC); }));
  if (!dir) return ErrnoStatus("open", parent, errno);
  return RemoveAt(dir.get(), name, path, 0);
}

Result<OpenedFile> OpenForRead(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return ErrnoStatus("stat", path, errno);
  if (S_ISDIR(st.st_mode)) return InvalidArgument("read " + path + ": is a directory");
  if (!S_ISREG(st.st_mode)) return InvalidArgument("read " + path + ": not a regular file");
  // O_NONBLOCK: if the path was swapped for a FIFO since stat, open must not hang the loop.
  UniqueFd fd(RetryEintr([&] { return ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY); }));
  if (!fd) return ErrnoStatus("open", path, errno);
  if (::fstat(fd.get(), &st) != 0) return ErrnoStatus("fstat", path, errno);
  if (!S_ISREG(st.st_mode)) return InvalidArgument("read " + path + ": not a regular file");
  return OpenedFile{std::move(fd), static_cast<uint64_t>(st.st_size)};
}

FileWriter::FileWriter(std::string path, std::string temp, UniqueFd fd, mode_t mode)
    : path_(std::move(path)), temp_(std::move(temp)), fd_(std::move(fd)), mode_(mode) {}

FileWriter::~FileWriter() {
  if (!committed_) ::unlink(temp_.c_str());
}

Result<std::unique_ptr<FileWriter>> FileWriter::Create(const std::string& path, mode_t mode,
                                                       const std::optional<Owner>& owner) {
  auto [parent, name] = SplitParent(path);
  if (name.empty() || path.back() == '/') return InvalidArgument("write " + path + ": not a file path");
  RETURN_IF_ERROR(MakeDirectory(parent, 0755, owner));
  // The temp name does not derive from `name` so it stays within NAME_MAX.
  std::string temp = JoinPath(parent, ".spaced-upload-" + RandomHex(8));
  UniqueFd fd(RetryEintr(
      [&] { return ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600); }));
  if (!fd) return ErrnoStatus("open", temp, errno);
  if (owner && ::fchown(fd.get(), owner->uid, owner->gid) != 0) {
    int e = errno;
    ::unlink(temp.c_str());
    return ErrnoStatus("fchown", path, e);
  }
  return std::unique_ptr<FileWriter>(new FileWriter(path, std::move(temp), std::move(fd), mode));
}

Status FileWriter::Append(std::string_view data) {
  while (!data.empty()) {
    ssize_t n = RetryEintr([&] { return ::write(fd_.get(), data.data(), data.size()); });
    if (n < 0) return ErrnoStatus("write", path_, errno);
    data.remove_prefix(static_cast<size_t>(n));
    size_ += static_cast<uint64_t>(n);
  }
  return Status::Ok();
}

Result<uint64_t> FileWriter::Commit() {
  // fchmod, not the open mode: the umask must not change the mode the caller asked for.
  if (::fchmod(fd_.get(), mode_) != 0) return ErrnoStatus("fchmod", path_, errno);
  if (::rename(temp_.c_str(), path_.c_str()) != 0) return ErrnoStatus("rename", path_, errno);
  committed_ = true;
  fd_.reset();
  return size_;
}

}  // namespace space::guest
