// The node agent's own uid (common/host_slots.h HostSlots::NodeUid): what it writes is handed
// to that uid while the process is still root, then it switches to it for good.
//
// As uid 0, a node owned every root-owned file of the host and could write it with no
// capability at all. As NodeUid it owns only its data dir, its run dirs and the VM cache; the
// sandbox roots, snapshots and templates stay uid 0's on disk (their own root's, through the
// idmapped mounts), and what it may not do there its root broker does (broker/protocol.h).
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "common/result.h"

namespace space::node {

// A directory the node writes: made (0700) if absent, and given to the node's uid, with, when
// `recursive`, every entry beneath it on the same filesystem that uid 0 owns (a node that ran
// as root made them). Symbolic links are never followed; a file with more than one link is left
// alone (it could be a host file linked in), as is anything of another owner.
struct NodeDir {
  std::string path;
  bool recursive = false;
  mode_t mode = 0700;
  // Files directly in it to give too, when present (same rules), when not `recursive`.
  std::vector<std::string> files;
};

// Hands `dirs` to `uid` (and gid `uid`). Needs CAP_CHOWN; call before BecomeNodeUser.
Status GiveToNodeUser(const std::vector<NodeDir>& dirs, uid_t uid);

// Checks that `uid` (with no group and no capability) can reach and write each of `dirs`:
// every directory above one must be searchable by others, which a data dir under a 0700
// directory of root's is not. The error names the first directory in the way. Asked in a child
// that switches to `uid`, so that the caller, still root, can undo what it set up (the pool's
// mount) when the answer is no. The caller must be one thread.
Status CheckNodeCanReach(const std::vector<NodeDir>& dirs, uid_t uid);

}  // namespace space::node
