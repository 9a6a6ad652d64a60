// Runtimes: the node's two ways to run a sandbox, namespaces on the host kernel (always) and a
// QEMU guest (when QEMU is present). Owned by the Node; the parts borrow it. Thread-safe as the
// runtimes are.
#pragma once

#include <memory>

#include "runtime/runtime.h"
#include "store/sandbox.h"

namespace space::node {

// The disk quota of a sandbox's root: what it may write. A vm sandbox's root also holds its
// guest RAM file (runtime/vm/guest_ram.h), which a running guest writes as it uses memory: its
// quota is disk_mb plus memory_mb, so using RAM never eats into the disk it asked for.
inline uint64_t RootQuotaBytes(store::RuntimeKind kind, const store::Resources& r) {
  const int64_t mb = r.disk_mb + (kind == store::RuntimeKind::kVm ? r.memory_mb : 0);
  return static_cast<uint64_t>(mb) << 20;
}

class Runtimes {
 public:
  Runtimes(std::unique_ptr<runtime::NsRuntime> ns, std::unique_ptr<runtime::Runtime> vm)
      : ns_(std::move(ns)), vm_(std::move(vm)) {}

  runtime::NsRuntime* ns() const { return ns_.get(); }
  runtime::Runtime* vm() const { return vm_.get(); }  // null without QEMU
  // The runtime of `kind`; ns when `kind` is vm and this node has none (a record from another
  // node: nothing of it runs here).
  runtime::Runtime* For(store::RuntimeKind kind) const {
    return kind == store::RuntimeKind::kVm && vm_ ? vm_.get() : ns_.get();
  }

 private:
  std::unique_ptr<runtime::NsRuntime> ns_;
  std::unique_ptr<runtime::Runtime> vm_;
};

}  // namespace space::node
