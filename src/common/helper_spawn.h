// SpawnHelper: starts one of SPACE's own helper processes (`space broker`, `space api-front`):
// this program's binary again, by /proc/self/exe, with a fixed argv, a PATH-only environment
// (never the node's: it may hold SPACE_KEK), only the descriptors it is given, every signal
// unblocked, and PR_SET_PDEATHSIG SIGKILL armed and checked against the forking process. The
// parent-death signal fires when the forking *thread* ends: fork from a thread that lives as
// long as the helper should.
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "common/result.h"

namespace space {

// A helper that never runs as root: it starts in a user namespace of its own whose id maps
// `map_ids` writes (through the root broker: runtime/ns/userns.h, shape kOneId) while the
// child waits, and becomes `uid` (gid the same, no groups) before exec, with capabilities it
// holds in that namespace only. After exec it holds none anywhere. So the spawner needs
// neither CAP_SETUID nor CAP_SETGID.
//
// With `root_in_namespace`, the helper instead becomes uid and gid 0 *of its namespace* and
// keeps the capabilities it holds there, across exec too (a build tool that chroots, chowns
// and mounts proc: node/build_jail.h). `map_ids` must then map 0 to an unprivileged host id
// (shape kSandbox); `uid` is unused.
struct HelperUser {
  uid_t uid = 0;
  bool root_in_namespace = false;
  std::function<Status(int pidfd, pid_t pid)> map_ids;
};

struct HelperSpec {
  std::vector<std::string> args;         // argv; args[0] is "space"
  std::vector<std::pair<int, int>> fds;  // (descriptor here, its number in the helper, >= 3); at most 8
  bool ignore_stop_signals = false;      // SIGINT and SIGTERM ignored (it outlives the node's orderly stop)
  HelperUser user;                       // map_ids empty: the helper starts with this process's ids
  int exe_fd = -1;                       // the program to run (fexecve); -1: /proc/self/exe
  std::vector<std::string> env;          // "K=V" entries besides PATH
};

// The helper's pid. What the helper does next is its own affair; the caller waits for it.
Result<pid_t> SpawnHelper(const HelperSpec& spec);

}  // namespace space
