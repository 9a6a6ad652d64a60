// The gateway worker: the body of the unprivileged process (`space gateway-worker`) the node
// runs its egress gateway in, so the code that parses raw sandbox traffic never runs as root.
// The node (node/gateway_process.h) execs it with one end of a SOCK_SEQPACKET socketpair and
// speaks ipc.h over it. The worker
//   1. takes the config message, loads the CA (its key is root-only) and the upstream CA file;
//   2. drops to `nobody`: no groups, every capability gone (bounding set too), no new
//      privileges, not dumpable; dies with the node (PR_SET_PDEATHSIG, re-armed after the uid
//      change, which clears it);
//   3. starts gateway::Gateway with hooks that ask the node for secrets and send it audit
//      records, answers `ready`, and serves register / unregister until `stop` or EOF.
#pragma once

#include <sys/types.h>

#include "common/result.h"

namespace space::gateway {

// Runs the worker on the inherited socket `fd`; `node_pid` is the parent that must be alive
// (the worker exits when its parent is another). Returns the process exit status.
int RunGatewayWorker(int fd, pid_t node_pid);

// Step 2 above, for a process that is still root; a no-op when it is not. Exposed for tests.
Status DropGatewayPrivileges();

}  // namespace space::gateway
