#include "node/templates.h"

#include <sys/mman.h>
#include <unistd.h>

#include "common/syscall.h"
#include "common/unique_fd.h"
#include "node/recipe.h"
#include "storage/oci_image.h"

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
  return Published(pool_->ImportTemplate(name, source, progress));
}

Result<storage::TemplateInfo> Templates::Published(Result<storage::TemplateInfo> t) {
  if (!t.ok() || publish_ == nullptr) return t;
  RETURN_IF_ERROR(publish_->PublishTemplate(*t).Annotate("template " + t->name + " is on this node; publishing it"));
  return t;
}

namespace {

std::string ShellWord(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./=:,@%+") ==
                        std::string::npos) {
    return s;
  }
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

TemplateConfig ConfigOf(const storage::ImageConfig& image) {
  TemplateConfig c;
  for (const auto& kv : image.env) {
    size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    c.env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  c.workdir = image.working_dir;
  c.user = image.user;
  for (const auto& a : image.cmd) c.start += (c.start.empty() ? "" : " ") + ShellWord(a);
  return c;
}

}  // namespace

Result<storage::TemplateInfo> Templates::ImportImage(const std::string& name, std::string_view archive,
                                                     const storage::ProgressFn& progress) {
  if (IsBuiltinTemplate(name)) return Conflict("template " + name + " is built in");
  ASSIGN_OR_RETURN(storage::Image image, storage::ReadImage(archive));
  if (progress) progress("image: " + std::to_string(image.layers.size()) + " layers");
  ASSIGN_OR_RETURN(
      std::string flat,
      storage::FlattenLayers(image.layers, {{kTemplateConfigPath, EncodeTemplateConfig(ConfigOf(image.config))}}));
  image.layers.clear();
  // The flattened tarball reaches tar -x in the build jail through a memfd, as a file would.
  int fd = ::memfd_create("space-image", MFD_CLOEXEC);
  if (fd < 0) return ErrnoStatus("memfd_create", "space-image", errno);
  UniqueFd tarball(fd);
  RETURN_IF_ERROR(WriteAll(tarball.get(), flat));
  if (::lseek(tarball.get(), 0, SEEK_SET) != 0) return ErrnoStatus("lseek", "space-image", errno);
  return Published(pool_->ImportTemplateTarball(name, tarball.get(), "image " + name, progress));
}

}  // namespace space::node
