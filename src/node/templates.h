// Templates: the root filesystems sandboxes are cloned from, as the node's pool holds them.
// The built-ins (base: Debian by debootstrap; busybox) are built on first use; others are
// imported from a directory or tarball below --import-root. Every step that writes a template
// runs in the build jail (node/build_jail.h), never with the node's privileges.
//
// Owned by the Node; borrows the pool. Thread-safe as the pool is.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "node/snapshots.h"
#include "storage/pool.h"

namespace space::node {

bool IsBuiltinTemplate(const std::string& name);

class Templates {
 public:
  // `publish` set (a fleet's node): each import is published to the shared store, so every
  // node can create from it (Snapshots::PublishTemplate).
  explicit Templates(storage::Pool* pool, Snapshots* publish = nullptr) : pool_(pool), publish_(publish) {}

  Result<std::vector<storage::TemplateInfo>> List() { return pool_->ListTemplates(); }
  Result<storage::TemplateInfo> Get(const std::string& name) { return pool_->GetTemplate(name); }
  // Builds a built-in template (or finds it built).
  Result<storage::TemplateInfo> Build(const std::string& name, const storage::ProgressFn& progress);
  Result<storage::TemplateInfo> Import(const std::string& name, const std::string& source,
                                       const storage::ProgressFn& progress);
  // A container image (an OCI image layout or a `docker save` tarball, uncompressed, in
  // memory): its layers flattened (storage/oci_image.h), its config's Env, WorkingDir, User and
  // Entrypoint+Cmd as the template's env, workdir, user and start, extracted in the build jail.
  Result<storage::TemplateInfo> ImportImage(const std::string& name, std::string_view archive,
                                            const storage::ProgressFn& progress);

 private:
  Result<storage::TemplateInfo> Published(Result<storage::TemplateInfo> t);

  storage::Pool* const pool_;
  Snapshots* const publish_;
};

}  // namespace space::node
