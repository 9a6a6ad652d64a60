// The gateway worker: the body of the unprivileged process (`space gateway-worker`) the node
// runs its egress gateway in, so the code that parses raw sandbox traffic never runs as root.
// The node (node/gateway_process.h) execs it with one end of a SOCK_SEQPACKET socketpair and
// speaks ipc.h over it. The worker
//   1. takes the config message, loads the CA (its key is root-only) and the upstream CA file;
//   2. drops to the uid the node gave it (the base of a uid slot the node holds for it, so
//      no sandbox, no other node's worker and no host account shares it): no groups, every
//      capability gone (bounding set too), no new privileges, not dumpable, its own seccomp
//      filter (worker_seccomp.h); PR_SET_PDEATHSIG re-armed after the uid change (which
//      clears it), though it reaches the worker only from a node that kept CAP_KILL: the
//      worker ends with the node because its channel closes (EOF, step 3);
//   3. starts gateway::Gateway with hooks that ask the node for secrets and send it audit
//      records, answers `ready`, and serves register / unregister until `stop` or EOF.
#pragma once

#include <sys/types.h>

#include "common/result.h"

namespace space::gateway {

// Runs the worker on the inherited socket `fd`; `node_pid` is the parent that must be alive
// (the worker exits when its parent is another). Returns the process exit status.
int RunGatewayWorker(int fd, pid_t node_pid, uid_t uid);

// Ids below this are the host's own accounts; the worker never takes one.
inline constexpr uid_t kMinWorkerUid = 65536;

// The privilege part of step 2, for a process that is still root (a no-op when it is not):
// `uid` (>= kMinWorkerUid) becomes every uid and gid.
Status DropGatewayPrivileges(uid_t uid);

}  // namespace space::gateway
