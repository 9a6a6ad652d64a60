// `space node prepare`: fetches, ahead of time, what a node's vm runtime would otherwise fetch
// on its first vm create (the guest kernel and modules, from the host's apt sources, into the
// vm cache: SPACE_VM_CACHE_DIR or /var/cache/space/vm). For nodes that run without a route to
// the package mirror, such as a node in its own network namespace. Idempotent.
#pragma once

namespace space::daemon {

int RunNodePrepare();

}  // namespace space::daemon
