// Container images as template sources: an OCI image layout or a `docker save` tarball, read
// in memory and flattened into one plain tarball of the image's root filesystem, which the
// pool then imports in the build jail (template_builder.h ImportTree) like any tarball.
//
// Flattening applies the layers in order with their whiteouts (".wh.<name>" removes a path of
// the layers below, ".wh..wh..opq" empties a directory of them) and keeps owners and modes.
// Hostile input: blobs are checked against their sha256 digests, layers and their inflated
// sizes are capped, and a member that would land below a symlink, a hard link whose target is
// not in the image, a device node, a FIFO, an absolute name or a ".." refuse the image.
// Stateless and thread-safe.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace space::storage {

inline constexpr size_t kMaxImageLayers = 128;
inline constexpr size_t kMaxImageBytes = 1u << 30;  // all layers, inflated

// What the image's config says about running it.
struct ImageConfig {
  std::vector<std::string> env;  // "K=V"
  std::string working_dir;
  std::string user;
  std::vector<std::string> cmd;  // Entrypoint then Cmd
};

struct Image {
  std::vector<std::string> layers;  // each an uncompressed tar, base first
  ImageConfig config;
};

// Reads an OCI image layout ("oci-layout", "index.json", "blobs/sha256/...") or a `docker save`
// tarball ("manifest.json"), both as one uncompressed tarball.
// `max_bytes`: the cap on all layers inflated.
Result<Image> ReadImage(std::string_view archive, size_t max_bytes = kMaxImageBytes);

// The layers applied in order, plus `extra_files` (path -> contents, mode 0644, root's), as
// one uncompressed tarball.
Result<std::string> FlattenLayers(const std::vector<std::string>& layers,
                                  const std::map<std::string, std::string>& extra_files);

}  // namespace space::storage
