// The gateway worker: the body of the unprivileged process (`space gateway-worker`) the node
// runs its egress gateway in, so the code that parses raw sandbox traffic never runs as root.
// The node (node/gateway_process.h) execs it with one end of a SOCK_SEQPACKET socketpair and
// speaks ipc.h over it. The worker
//   1. takes the config message and loads the CA: from the message's PEM text when the node
//      started it without root (the node's way: it runs as its uid from the start, in a user
//      namespace the root broker maps to that uid alone), else from the root-only key file;
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

// The privilege part of step 2. For a process that is still root: `uid` (>= kMinWorkerUid)
// becomes every uid and gid. For one started as `uid` (the node's way since it holds no
// CAP_SETUID: in a user namespace of its own): checks that it is `uid` with no capabilities,
// then no_new_privs and not dumpable.
Status DropGatewayPrivileges(uid_t uid);

}  // namespace space::gateway
