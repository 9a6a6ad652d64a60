#include "node/node_seccomp.h"

#include "common/seccomp_denylist.h"

namespace space::node {

Status LoadNodeSeccomp() {
  DenyList list;
  list.syscalls = KernelSurfaceSyscalls();
  // The node makes namespaces for sandboxes and signals their processes.
  list.no_new_namespaces = false;
  list.signals_only_to_self = false;
  return LoadDenyList(list);
}

}  // namespace space::node
