// The tree jail: where the node reads trees it could not read without host privilege. A
// snapshot holds files of the sandbox's users (mode 0600 of uid 1000, say); reading them as
// host root takes CAP_DAC_READ_SEARCH on the host, which would let the node read any host
// file. The jail reads them instead, as root of a user namespace of its own on a uid slot
// leased for the read (the shape of a sandbox), through read-only idmapped clones of the trees
// that the root broker makes (idmap_tree, read_only): there every file of the tree is owned by
// an id of that namespace, so its capabilities there reach them, and nothing of the host's
// own files. It keeps only CAP_DAC_READ_SEARCH, with no_new_privs and a seccomp filter that
// refuses sockets (no network) and what no SPACE helper does (exec, ptrace, mounts, new
// namespaces), and writes its result as JSON to a pipe the node reads as hostile input
// (bounded, validated): the trees are the sandbox's.
//
// Snapshot diffs (storage::DiffTreesAt), exports (snapshot::ExportAt) and restores
// (snapshot::RestoreAt), and new templates' digests (storage::DigestTreeAt): for the last two the store is the node's, reached over a channel the
// node serves (snapshot/blob_channel.h). A restore writes, so it runs over a writable clone and
// keeps CAP_CHOWN, CAP_DAC_OVERRIDE, CAP_FOWNER and CAP_FSETID of its namespace instead.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "common/privileged_acts.h"
#include "common/result.h"
#include "snapshot/blob_store.h"
#include "snapshot/exporter.h"
#include "storage/diff.h"
#include "storage/digest.h"

namespace space::node {

struct TreeJailConfig {
  std::function<Result<int64_t>()> acquire_slot;  // a uid slot leased for one read
  std::function<void(int64_t)> release_slot;
  PrivilegedActs* privileged = nullptr;           // id maps, idmapped clones, kills: the broker's
};

// The largest result the node takes from the jail.
inline constexpr size_t kMaxTreeJailOutputBytes = 64 << 20;

// storage::DiffTrees(a_dir, b_dir, max_entries), run in the jail.
Result<storage::TreeDiff> DiffInTreeJail(const TreeJailConfig& config, const std::string& a_dir,
                                         const std::string& b_dir, size_t max_entries = 10000);

// snapshot::Export(tree_dir, snap_id, parent_id, store), run in the jail: the node serves the
// jail's store requests (snapshot::ServeBlobChannel: verified objects, only this manifest) and
// counts what was written itself.
Result<snapshot::ExportStats> ExportInTreeJail(const TreeJailConfig& config, const std::string& tree_dir,
                                               const std::string& snap_id, const std::string& parent_id,
                                               snapshot::BlobStore& store);

// storage::DigestTree(tree_dir), run in the jail: a new template's digest (what pins it).
Result<storage::TreeDigest> DigestInTreeJail(const TreeJailConfig& config, const std::string& tree_dir);

// Objects a restore fetches ahead of the jail's requests (snapshot/read_ahead_store.h).
inline constexpr int kRestoreReadAhead = 4;

// snapshot::Restore(snap_id, store, dest_dir), run in the jail over a writable idmapped clone of
// `dest_dir` (a pool scratch tree): the node serves the snapshot's manifest and the objects it
// lists, nothing else.
Status RestoreInTreeJail(const TreeJailConfig& config, const std::string& snap_id, snapshot::BlobStore& store,
                         const std::string& dest_dir);

// Parses and checks what the jail wrote (exposed for tests): at most `max_entries` paths in
// all, each absolute and at most PATH_MAX bytes.
Result<storage::TreeDiff> ParseTreeDiff(const std::string& json, size_t max_entries);

// The jail's own side, `space tree-jail diff --max-entries N`, `space tree-jail export
// --snap-id S --parent P`, `space tree-jail restore --snap-id S` or `space tree-jail digest`
// (fds 3, 4 and for an export or a restore 5, set up by the node), started only by the
// functions above. Returns the exit code.
int TreeJailMain(int argc, char** argv);

}  // namespace space::node
