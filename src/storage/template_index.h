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

}  // namespace space::storage
