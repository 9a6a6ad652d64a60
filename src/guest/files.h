// File operations for kFileOp (see protocol.h for the JSON).
//
// spaced runs pivoted into the sandbox root, so ordinary path resolution is already
// confined to the sandbox; these functions only validate and do the operation. Each
// returns a Status whose message names the call, path and errno. Stateless apart from
// FileWriter, which is owned by the event loop's stream and is thread-compatible.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "common/result.h"
#include "common/unique_fd.h"

namespace space::guest {

inline constexpr int kMaxListDepth = 8;
inline constexpr size_t kMaxListEntries = 10000;
// Recursive delete keeps one directory fd open per level; this bounds fd use and
// recursion on a hostile, deeply nested tree.
inline constexpr int kMaxDeleteDepth = 256;

struct FileOp {
  enum class Kind { kRead, kWrite, kList, kStat, kMkdir, kMove, kDelete };
  Kind kind = Kind::kStat;
  std::string path;
  std::string to;                  // kMove
  std::optional<mode_t> mode;      // kWrite (default 0644), kMkdir (default 0755)
  bool recursive = false;          // kDelete
  int depth = 1;                   // kList
  // kWrite, kMkdir: the account (name or uid) that owns what the op creates, so a file an
  // E2B client writes as `user` is that user's, as envd does it. Absent: root.
  std::string owner;
};

// uid and gid that created files and directories get.
struct Owner {
  uid_t uid = 0;
  gid_t gid = 0;
};

// Parses and validates a kFileOp payload; failures are kInvalidArgument.
Result<FileOp> ParseFileOp(std::string_view payload);

// Entry JSON for `path` (lstat: a symlink is reported as a symlink).
Result<nlohmann::json> StatPath(const std::string& path);
// {"entries": [...]} of the directory at `path`, descending `depth` levels (1 = just its
// children), at most kMaxListEntries, sorted by name within each directory.
Result<nlohmann::json> ListDirectory(const std::string& path, int depth);
// mkdir -p; `mode` applies to created directories (subject to umask); `owner` (if any)
// becomes the owner of every directory this call created.
Status MakeDirectory(const std::string& path, mode_t mode, const std::optional<Owner>& owner = std::nullopt);
// rename(2), creating the destination's parent directories first.
Status MovePath(const std::string& from, const std::string& to);
// unlink or rmdir; `recursive` removes a directory tree without following symlinks.
Status DeletePath(const std::string& path, bool recursive);

// A regular file opened for a "read" op (follows symlinks). A directory is
// kInvalidArgument "is a directory", a missing file kNotFound.
struct OpenedFile {
  UniqueFd fd;
  uint64_t size = 0;
};
Result<OpenedFile> OpenForRead(const std::string& path);

// An upload in progress: data goes to a hidden temp file in the destination directory and
// is renamed over `path` on Commit, so an aborted upload never leaves a partial file. The
// destructor removes the temp file unless committed.
class FileWriter {
 public:
  // Creates parent directories (0755) and the temp file, owned by `owner` when given.
  static Result<std::unique_ptr<FileWriter>> Create(const std::string& path, mode_t mode,
                                                    const std::optional<Owner>& owner = std::nullopt);
  ~FileWriter();
  FileWriter(const FileWriter&) = delete;
  FileWriter& operator=(const FileWriter&) = delete;

  Status Append(std::string_view data);
  // Sets the mode and renames into place. Returns the file's size.
  Result<uint64_t> Commit();
  const std::string& path() const { return path_; }

 private:
  FileWriter(std::string path, std::string temp, UniqueFd fd, mode_t mode);
  std::string path_;
  std::string temp_;
  UniqueFd fd_;
  mode_t mode_;
  uint64_t size_ = 0;
  bool committed_ = false;
};

// Splits "/a/b/c" into ("/a/b", "c"); trailing slashes are ignored. "/" yields ("/", "").
std::pair<std::string, std::string> SplitParent(const std::string& path);

}  // namespace space::guest
