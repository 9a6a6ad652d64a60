// Small filesystem helpers the pool needs beyond common/syscall.h: recursive removal that
// never follows symlinks, and directory listing. Stateless, thread-safe.
#pragma once

#include <string>
#include <vector>

#include "common/dir.h"
#include "common/result.h"

namespace space::storage {

// rm -rf `path`: removes a file or a directory tree without following symlinks and without
// crossing into other mounts' contents (a mount point inside fails with EBUSY). OK if absent.
Status RemoveTree(const std::string& path);

// Names in directory `path` (no "." or ".."), sorted.
Result<std::vector<std::string>> ListDir(const std::string& path);

// True if `path` exists (lstat).
bool PathExists(const std::string& path);

}  // namespace space::storage
