// Directory helpers shared by the store, exporter and restorer: every lookup is relative to
// a dirfd and never follows a symlink. Stateless, thread-safe.
#pragma once

#include <string>
#include <vector>

#include "common/dir.h"
#include "common/result.h"
#include "common/unique_fd.h"

namespace space::snapshot {


// Opens directory `name` beneath `parent_fd`; fails (ENOTDIR/ELOOP) if it is a symlink or
// not a directory, which is what keeps a walk beneath its root.
Result<UniqueFd> OpenDirAt(int parent_fd, const std::string& name, const std::string& what);

// fsync on a directory fd: makes creations, renames and unlinks in it durable.
Status FsyncDir(int dir_fd, const std::string& what);

}  // namespace space::snapshot
