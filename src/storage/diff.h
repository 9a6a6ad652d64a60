// Differences between two directory trees, typically two snapshots of one sandbox root, or
// a snapshot and its live root. The trees come from sandboxes and are hostile: the walk never
// follows a symlink and never leaves the two trees. Stateless, thread-safe.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "common/result.h"

namespace space::storage {

// Paths relative to the tree roots with a leading "/", each list in walk order (depth-first,
// names sorted within a directory).
struct TreeDiff {
  std::vector<std::string> added;    // in `b` only
  std::vector<std::string> changed;  // in both, different
  std::vector<std::string> removed;  // in `a` only
  bool truncated = false;            // stopped at max_entries; more differences exist
};

// Compares tree `a` (before) with tree `b` (after). An entry is changed when its type, mode,
// owner, size, device number, symlink target or content differ; a type change also lists what
// lies below the old directory as removed and below the new one as added. A directory that
// exists on one side only is listed along with everything below it. Directories themselves
// are changed only by mode or owner: their size and times follow their children's.
//
// Content is read only when needed. When type, mode, owner, size, mtime, ctime and inode
// number all agree the file is unchanged: a btrfs snapshot keeps inode numbers and times, and
// any write to the file in between would have moved its ctime, which no caller can set. When
// only times or the inode number differ, the bytes decide (a rewrite with the same content,
// or a copy, is not a change).
Result<TreeDiff> DiffTrees(const std::string& a, const std::string& b, size_t max_entries = 10000);
// The same for two open directories (readable descriptors, not O_PATH: their entries are read).
Result<TreeDiff> DiffTreesAt(int a_fd, int b_fd, size_t max_entries = 10000);

}  // namespace space::storage
