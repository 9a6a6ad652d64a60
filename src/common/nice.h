// Nice values of this process's threads and children. The node's warm-pool refill thread runs
// at a lower priority (a higher nice value, which needs no privilege), and what it makes that
// outlives the refill (a pooled sandbox's first process, the thread that reads its channel)
// goes back to normal. Lowering a nice value, or setting one of a child under another uid,
// takes CAP_SYS_NICE, which the node leaves to its root broker (`acts`: broker.h, child_nice
// and node_thread_nice). With no `acts` (unit tests, a node without a broker) such a change
// fails with the kernel's error.
#pragma once

#include <sys/types.h>

#include "common/privileged_acts.h"
#include "common/result.h"

namespace space {

// Sets the nice value (0..19) of the child `pid` behind `pidfd`: tried here first (a child under
// this process's own uid, or a raise), then through `acts` when set.
Status SetChildNice(PrivilegedActs* acts, int pidfd, pid_t pid, int nice);

// Sets the calling thread's nice value (0..19), likewise.
Status SetThreadNice(PrivilegedActs* acts, int nice);

}  // namespace space
