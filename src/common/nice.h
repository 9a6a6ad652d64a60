// Nice values of this process's threads and children. The node's warm-pool refill thread runs
// at a lower priority (a higher nice value, which needs no privilege), and what it makes that
// outlives the refill (a pooled sandbox's first process, the thread that reads its channel)
// goes back to normal. Lowering a nice value, or setting one of a child under another uid,
// takes CAP_SYS_NICE, which the node leaves to its root broker: the node installs a route
// through the broker once (broker.h, child_nice and node_thread_nice). Without a route (unit
// tests, a node without a broker) such a change fails with the kernel's error.
#pragma once

#include <sys/types.h>

#include <functional>

#include "common/result.h"

namespace space {

struct NiceRoute {
  std::function<Status(int pidfd, int nice)> child;  // a child of this process, by pidfd
  std::function<Status(pid_t tid, int nice)> thread;  // a thread of this process
};

// Where changes this process may not make itself go from now on (empty: nowhere). Thread-safe.
void SetNiceRoute(NiceRoute route);

// Sets the nice value (0..19) of the child `pid` behind `pidfd`: tried here first (a child under
// this process's own uid, or a raise), then through the route.
Status SetChildNice(int pidfd, pid_t pid, int nice);

// Sets the calling thread's nice value (0..19), likewise.
Status SetThreadNice(int nice);

}  // namespace space
