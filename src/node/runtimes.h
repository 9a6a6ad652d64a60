// Runtimes: the node's two ways to run a sandbox, namespaces on the host kernel (always) and a
// QEMU guest (when QEMU is present). Owned by the Node; the parts borrow it. Thread-safe as the
// runtimes are.
#pragma once

#include <memory>

#include "runtime/runtime.h"
#include "store/sandbox.h"

namespace space::node {

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
