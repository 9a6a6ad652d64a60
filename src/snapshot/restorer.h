// Restore: recreates a snapshot's tree from a BlobStore beneath a host directory.
//
// The manifest is loaded and validated first (it is untrusted), then entries are created in
// manifest order relative to dirfds: every intermediate directory is opened with
// O_NOFOLLOW|O_DIRECTORY and every file with O_CREAT|O_EXCL|O_NOFOLLOW, so nothing the
// restore creates (say, a symlink "a" -> "/etc") can redirect a later entry ("a/passwd")
// outside `dest_dir`. Each chunk is decompressed to exactly its manifest size and its SHA-256
// checked before a byte of it is written; a mismatch fails the restore with
// "object <hex> corrupt" and the partly written file is removed, so wrong content is never
// left behind looking complete. Directory modes and mtimes are applied after their contents
// (children before parents), since creating entries changes a directory's mtime and a
// read-only mode would block them.
//
// `dest_dir` must exist and should be empty: entries that already exist fail with kConflict
// (the root "." takes the snapshot's root metadata). On failure `dest_dir` holds a partial
// tree the caller must discard. Restored files are not fsynced (the caller syncfs()es if it
// needs durability). Stateless, thread-safe for distinct destinations.
#pragma once

#include <string>

#include "common/status.h"
#include "snapshot/blob_store.h"

namespace space::snapshot {

struct RestoreOptions {
  // Apply the manifest's uid/gid (fchownat AT_SYMLINK_NOFOLLOW). Needs CAP_CHOWN; without
  // it files keep the restoring user's ownership.
  bool preserve_owner = true;
  // Owners at or above this id are restored as kOverflowOwner. A sandbox tree holds ids
  // 0..65535 on disk (its uid range, seen through an idmapped mount); anything else in a
  // manifest comes from a tampered store or a host-imported template, and must not become a
  // file owned by an arbitrary host uid. Inside the sandbox such a file reads as the
  // overflow id either way, so nothing the sandbox sees changes.
  uint32_t owner_id_limit = 65536;
};

// What the kernel shows for an id with no mapping (/proc/sys/kernel/overflowuid).
inline constexpr uint32_t kOverflowOwner = 65534;

// NotFound if `snap_id` has no manifest (never exported, or its export did not finish).
Status Restore(const std::string& snap_id, BlobStore& store, const std::string& dest_dir,
               const RestoreOptions& options = {});
// The same beneath an open directory `dest_fd` (not owned).
Status RestoreAt(const std::string& snap_id, BlobStore& store, int dest_fd, const RestoreOptions& options = {});

}  // namespace space::snapshot
