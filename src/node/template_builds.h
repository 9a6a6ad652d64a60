// TemplateBuilds: templates built from a recipe (node/recipe.h), and their removal.
//
// A build is an operation (kind "template_build", target "template:<name>", so two builds of
// one name run in turn). Each step that is not in the layer cache runs in a sandbox of the
// previous layer: an ordinary ns sandbox of the build's team, created in the operation's
// thread, with the build's egress profiles as its only network, whose commands run as root of
// its user namespace (never as host root, as every sandbox's). After a step the sandbox's root
// becomes a read-only layer (Pool::CommitRoot) recorded under the step's cache key, so the
// next build with the same parent and step takes the layer without running anything. The last
// layer gets the name; its output streams to a BuildLog.
//
// Owned by the Node; borrows the pool, the lifecycle, SandboxIo, the operations and the store.
// Thread-safe.
#pragma once

#include <memory>
#include <shared_mutex>
#include <string>

#include "node/build_log.h"
#include "node/lifecycle.h"
#include "node/operations.h"
#include "node/recipe.h"
#include "node/sandbox_io.h"
#include "node/snapshots.h"
#include "storage/pool.h"
#include "store/store.h"

namespace space::node {

class TemplateBuilds {
 public:
  struct Deps {
    storage::Pool* pool = nullptr;
    Lifecycle* lifecycle = nullptr;
    SandboxIo* io = nullptr;
    Operations* ops = nullptr;
    store::Store* store = nullptr;
    // Set on a fleet's nodes: each built template is published to the shared store, so every
    // node can create from it (Snapshots::PublishTemplate). Null: it stays on this node.
    Snapshots* publish = nullptr;
  };
  explicit TemplateBuilds(Deps deps) : d_(deps) {}

  // Queues the build. Refused up front: a built-in name, a name another team built, an
  // unknown parent, a copy step whose source the context lacks.
  Result<store::OperationRecord> Build(Recipe recipe);
  // The log of build `op_id` of template `name` on this node, for `team`.
  Result<std::shared_ptr<BuildLog>> Log(const std::string& team, const std::string& name, const std::string& op_id);
  // Forgets template `name` and frees its trees. conflict while a sandbox that is not ended
  // uses it, unless `force`; conflict for a built-in.
  Status Remove(const std::string& team, const std::string& name, bool force);
  // Frees the layers no template name holds (the cache's intermediate steps, a name's digests
  // older than kMaxEarlierDigests), once the builds running now have finished; new builds wait
  // for it. A rebuild after it runs the freed steps again. Returns how many layers went.
  Result<uint64_t> CollectLayers();

 private:
  Status Run(const Recipe& recipe, BuildLog* log);
  // May `team` replace or remove template `name` (absent: yes)?
  Status CheckOwner(const std::string& team, const std::string& name);

  const Deps d_;
  BuildLogs logs_;
  // Builds hold it shared for their whole run, CollectLayers exclusively: a build's layers
  // have no name until its last step.
  std::shared_mutex layers_mu_;
};

}  // namespace space::node
