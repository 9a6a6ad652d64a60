// SIGKILL for a child of this process. The node's children run under other uids (a sandbox's
// init, a VMM, the gateway worker, the API front), so killing one takes CAP_KILL, which the
// node leaves to its root broker (`acts`), which kills only children of the node (broker.h,
// kill_child). With no `acts` (unit tests, the broker itself, a node without a broker) a kill
// this process may not send fails.
#pragma once

#include <sys/types.h>

#include "common/privileged_acts.h"
#include "common/result.h"

namespace space {

// Ok once SIGKILL is on its way to the child behind `pidfd` or the child has exited; an
// error says it may still run. Tried here first: a child under this process's own uid (a
// helper that kept root) needs no broker; a kill refused here goes through `acts` when set.
Status KillChild(PrivilegedActs* acts, int pidfd);

// The same for a child by pid. Only for a child not yet waited for, whose pid cannot name
// another process before the wait.
Status KillChildPid(PrivilegedActs* acts, pid_t pid);

}  // namespace space
