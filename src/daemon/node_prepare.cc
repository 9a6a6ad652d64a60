#include "daemon/node_prepare.h"

#include <cstdlib>
#include <iostream>

#include "runtime/runtime.h"
#include "runtime/vm/guest_assets.h"

namespace space::daemon {

int RunNodePrepare() {
  const char* env = std::getenv("SPACE_VM_CACHE_DIR");
  const std::string cache = env != nullptr && env[0] == '/' ? env : runtime::RuntimeConfig{}.vm_cache_dir;
  auto kernel = runtime::vm::EnsureGuestKernel(cache);
  if (!kernel.ok()) {
    std::cerr << "space node prepare: " << kernel.status().ToString() << "\n";
    return 1;
  }
  std::cout << "guest kernel " << kernel->version << " in " << kernel->dir << "\n";
  return 0;
}

}  // namespace space::daemon
