#include "node/templates.h"

namespace space::node {

bool IsBuiltinTemplate(const std::string& name) { return name == "base" || name == "busybox"; }

Result<storage::TemplateInfo> Templates::Build(const std::string& name, const storage::ProgressFn& progress) {
  if (!IsBuiltinTemplate(name))
    return InvalidArgument("only the built-in templates base and busybox can be built here");
  return pool_->EnsureTemplate(name, progress);
}

Result<storage::TemplateInfo> Templates::Import(const std::string& name, const std::string& source,
                                                const storage::ProgressFn& progress) {
  if (IsBuiltinTemplate(name)) return Conflict("template " + name + " is built in");
  return pool_->ImportTemplate(name, source, progress);
}

}  // namespace space::node
