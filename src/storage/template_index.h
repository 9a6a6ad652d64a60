// templates/index.json: the name -> digest mapping of the pool's templates.
//   {"templates": {"<name>": {"digest": "sha256:..", "size_bytes": N, "created_at_ms": T}}}
// Rewritten whole and atomically on every change. Not thread-safe: Pool serializes access.
#pragma once

#include <map>
#include <string>

#include "common/result.h"
#include "storage/pool.h"

namespace space::storage {

using TemplateIndex = std::map<std::string, TemplateInfo>;  // by name; `path` left empty

// A missing file is an empty index.
Result<TemplateIndex> LoadTemplateIndex(const std::string& path);
Status SaveTemplateIndex(const std::string& path, const TemplateIndex& index);

// templates/layers.json: the build layer cache, step key -> layer digest.
//   {"layers": {"<key>": "sha256:.."}}
// Same rules as the index: rewritten whole and atomically, serialized by Pool.
using LayerCache = std::map<std::string, std::string>;
inline constexpr size_t kMaxCachedLayers = 4096;
Result<LayerCache> LoadLayerCache(const std::string& path);
Status SaveLayerCache(const std::string& path, const LayerCache& cache);

}  // namespace space::storage
