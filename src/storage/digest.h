// Content digest of a directory tree: what pins a template.
//
// "sha256:" + hex SHA-256 over a canonical depth-first walk in byte-sorted name order. For
// every entry (the root itself is ".") one record is hashed:
//   path \0 type \0 mode(07777, octal) \0 uid \0 gid \0 size \0 rdev \0 symlink-target \0
//   sha256(contents) \0 \n
// size is the file length for regular files and symlinks and 0 otherwise (directory sizes
// differ between filesystems); rdev is major:minor for device nodes. Timestamps, inode
// numbers, hard-link identity and xattrs are not covered. Symlinks are never followed.
// Stateless and thread-safe.
#pragma once

#include <cstdint>
#include <string>

#include "common/result.h"

namespace space::storage {

struct TreeDigest {
  std::string digest;       // "sha256:<64 hex>"
  uint64_t size_bytes = 0;  // sum of regular file and symlink sizes
};

Result<TreeDigest> DigestTree(const std::string& root);
// The same for a tree whose root directory is open (readable) as `root_fd`.
Result<TreeDigest> DigestTreeAt(int root_fd);

// "sha256:<hex>" of a byte string (exposed for tests and small callers).
std::string Sha256Hex(std::string_view data);

}  // namespace space::storage
