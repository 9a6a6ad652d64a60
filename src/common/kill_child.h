// SIGKILL for a child of this process. The node's children run under other uids (a sandbox's
// init, a VMM, the gateway worker, the API front), so killing one takes CAP_KILL, which the
// node leaves to its root broker: the node installs a route through the broker once, and the
// broker kills only children of the node (broker.h, kill_child). Without a route (unit tests,
// the broker itself, a node without a broker) a kill this process may not send fails.
#pragma once

#include <sys/types.h>

#include <functional>

#include "common/result.h"

namespace space {

// Sends SIGKILL to the process behind the pidfd on this process's behalf; kNotFound when it
// has already exited.
using ChildKillRoute = std::function<Status(int pidfd)>;

// Where kills this process may not send itself go from now on (empty: nowhere). Thread-safe.
void SetChildKillRoute(ChildKillRoute route);

// Ok once SIGKILL is on its way to the child behind `pidfd` or the child has exited; an
// error says it may still run. Tried here first: a child under this process's own uid (a
// helper that kept root) needs no broker.
Status KillChild(int pidfd);

// The same for a child by pid. Only for a child not yet waited for, whose pid cannot name
// another process before the wait.
Status KillChildPid(pid_t pid);

}  // namespace space
