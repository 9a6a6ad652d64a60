// Export: writes a read-only directory tree (e.g. a btrfs read-only snapshot of a sandbox
// root) to a BlobStore as chunk objects plus a manifest.
//
// Order is what makes a crash safe: every object is Put (durably) first and the manifest last,
// so a snapshot either has a manifest whose objects all exist, or no manifest at all and is
// not restorable; the orphaned objects are removed by CollectGarbage.
//
// Incremental: a regular file whose path, size, mtime_ns, mode, uid and gid equal the parent
// manifest's entry reuses the parent's chunk list without being read. Everything else is read
// in 4 MiB chunks; a chunk's object key is the SHA-256 of its raw bytes and it is compressed
// (zstd) and Put only when the store lacks it, so identical content is stored once.
//
// What is exported: directories, regular files and symlinks (never followed: every open is
// openat with O_NOFOLLOW beneath the tree's root fd), with mode bits, uid, gid and mtime.
// Device nodes, fifos and sockets are skipped and counted in ExportStats::skipped_special: a
// sandbox root must not smuggle device nodes into another sandbox's restore. Not exported:
// xattrs (so ACLs and file capabilities), hard-link identity (each link becomes its own file,
// sharing objects), holes (sparse files restore dense), atime/ctime.
//
// The tree must not change during the export (that is why it is a read-only snapshot); a file
// that shrinks mid-read fails the export with kUnavailable. Stateless; concurrent exports to
// one store are safe with distinct snap_ids, but CollectGarbage must not run concurrently with
// an export (it would collect the export's not-yet-referenced objects).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "common/result.h"
#include "snapshot/blob_store.h"

namespace space::snapshot {

struct ExportStats {
  uint64_t files = 0;            // regular files in the manifest
  uint64_t dirs = 0;             // directories, the root included
  uint64_t symlinks = 0;
  uint64_t skipped_special = 0;  // devices, fifos, sockets left out
  uint64_t files_reused = 0;     // files whose chunks came from the parent, unread
  uint64_t bytes_total = 0;      // sum of file sizes
  uint64_t bytes_read = 0;       // file bytes actually read
  uint64_t objects_written = 0;  // objects Put by this export
  uint64_t bytes_written = 0;    // compressed bytes of those objects
  int64_t duration_ms = 0;
};

struct ExportOptions {
  int zstd_level = 3;
  // Called after each regular file with the counts so far (on the exporting thread).
  std::function<void(const ExportStats&)> progress;
  // Test hook simulating a crash: called before each object Put with "object <hex>" and
  // before the manifest Put with "manifest"; an error aborts the export there, writing
  // nothing more.
  std::function<Status(const std::string& stage)> fault;
};

// Exports `tree_dir` as snapshot `snap_id`. `parent_id` ("" for a full export) must name a
// restorable snapshot. Conflict if `snap_id` already has a manifest.
Result<ExportStats> Export(const std::string& tree_dir, const std::string& snap_id, const std::string& parent_id,
                           BlobStore& store, const ExportOptions& options = {});
// The same for a tree whose root directory is open (readable) as `root_fd`.
Result<ExportStats> ExportAt(int root_fd, const std::string& snap_id, const std::string& parent_id, BlobStore& store,
                             const ExportOptions& options = {});

}  // namespace space::snapshot
