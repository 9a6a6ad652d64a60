// The API front: the process that owns the API's listening socket and talks HTTP to clients,
// so that no process running as root parses a byte a client sends before the front has
// framed it. It runs as an unprivileged uid (nobody) with no capabilities in any set,
// chrooted into an empty directory, no_new_privs, not dumpable, under a seccomp filter that
// also refuses socket(), connect(), bind() and listen(): it can accept on the socket it was
// given and reach the node over its channel, and nothing else.
//
// Slow and oversized clients (api/http_server.h limits) end here. Each request it has read
// whole goes to the node re-serialized (forwarder.h); the node still parses that request, its
// JSON and its authentication, as root, until the API handlers move out of the node too.
//
// `space dev` / `space node` start it (front_process.h) as `space api-front`.
#pragma once

#include <sys/types.h>

#include "common/result.h"

namespace space::front {

// The front's identity: nobody/nogroup on Debian.
inline constexpr uid_t kFrontUid = 65534;
inline constexpr gid_t kFrontGid = 65534;

// Gives up root for good: empty chroot, uid/gid kFrontUid, no supplementary groups, every
// capability set (bounding and ambient too) empty, no_new_privs, not dumpable, seccomp filter.
// `empty_dir`: a root-owned directory nobody can write. Verified afterwards, not assumed.
Status DropToFront(const std::string& empty_dir);

// Serves clients on `listen_fd`, forwarding to the node over `channel_fd`, until the node's end
// of the channel closes. Returns the exit code.
int RunFront(int channel_fd, int listen_fd, pid_t node_pid);

}  // namespace space::front
