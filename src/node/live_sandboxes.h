// LiveSandboxes: the table of sandboxes booted on this node (each one's guest channel,
// processes and runtime), and which of them an operation is ending. Shared by the node's parts;
// owned by the Node.
//
// Thread-safe: every method takes the table's lock, and never holds it across I/O. An entry
// is a shared_ptr, so a caller keeps using a sandbox that another thread removes.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "common/thread_annotations.h"
#include "node/live.h"

namespace space::node {

class LiveSandboxes {
 public:
  // Null when `id` is not booted here.
  std::shared_ptr<LiveSandbox> Find(const std::string& id) const;
  void Insert(std::shared_ptr<LiveSandbox> live);
  // The entry removed, or null.
  std::shared_ptr<LiveSandbox> Remove(const std::string& id);
  std::vector<std::shared_ptr<LiveSandbox>> All() const;
  std::vector<std::string> Ids() const;
  // Empties the table (the node stops) and returns what it held.
  std::map<std::string, std::shared_ptr<LiveSandbox>> TakeAll();
  size_t size() const;

  // "Ending": a destroy, timeout or failure is under way, so no second one starts and a create
  // that finishes booting meanwhile does not record the sandbox running.
  void MarkEnding(const std::string& id);
  void UnmarkEnding(const std::string& id);
  bool IsEnding(const std::string& id) const;
  // Marks ending, and returns, every entry not yet ending for which `pred` holds (under the
  // table's lock: `pred` must not block).
  std::vector<std::shared_ptr<LiveSandbox>> ClaimEndingIf(const std::function<bool(const LiveSandbox&)>& pred);

 private:
  mutable Mutex mu_;
  std::map<std::string, std::shared_ptr<LiveSandbox>> live_ GUARDED_BY(mu_);
  std::set<std::string> ending_ GUARDED_BY(mu_);
};

}  // namespace space::node
