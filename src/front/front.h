// The API front: the process that owns the API's listening socket and talks HTTP to clients,
// so that no process running as root parses a byte a client sends before the front has
// framed it. It runs as an unprivileged uid (the node's: a uid slot of its own, started as it
// in a user namespace the root broker maps to it alone) with no capabilities in any set,
// chrooted into an empty directory, no_new_privs, not dumpable, under a seccomp filter that
// also refuses socket(), connect(), bind() and listen(): it can accept on the socket it was
// given and reach the node over its channel, and nothing else.
//
// Slow and oversized clients (http/http_server.h limits) end here. Each request it has read
// whole goes to the node re-serialized (forwarder.h); the node still parses that request, its
// JSON and its authentication, as root, until the API handlers move out of the node too.
//
// `space dev` / `space node` start it (front_process.h) as `space api-front`.
#pragma once

#include <sys/types.h>

#include "common/result.h"

namespace space::front {

// The identity a front started as root takes (nobody/nogroup on Debian). The node's fronts
// start as a uid slot of their own instead (front_process.h, HelperUser) and keep it.
inline constexpr uid_t kFrontUid = 65534;
inline constexpr gid_t kFrontGid = 65534;

// Gives up root for good: empty chroot, uid/gid kFrontUid, no supplementary groups, every
// capability set (bounding and ambient too) empty, no_new_privs, not dumpable, seccomp filter.
// `empty_dir`: a root-owned directory nobody can write. Verified afterwards, not assumed.
// A front started under its own uid in a user namespace of its own (common/helper_spawn.h
// HelperUser, the node's way) keeps that uid, and chroots from a user namespace nested in its
// own, whose capabilities it then empties; the directory must exist (MakeFrontRoot).
Status DropToFront(const std::string& empty_dir);

// Makes the front's empty root (0555) when missing; the node calls it before a front that
// does not start as root.
Status MakeFrontRoot(const std::string& empty_dir);

// Serves clients on `listen_fd`, forwarding to the node over `channel_fd`, until the node's end
// of the channel closes. Returns the exit code.
int RunFront(int channel_fd, int listen_fd, pid_t node_pid);

}  // namespace space::front
