// Validation of the names that become path components under the pool: template names,
// sandbox ids, snapshot ids and template digests. Pure functions, thread-safe.
#pragma once

#include <string>

#include "common/result.h"

namespace space::storage {

// [a-z0-9][a-z0-9._-]{0,62}
Status ValidateTemplateName(const std::string& name);
// [A-Za-z0-9_]{1,64}
Status ValidateSandboxId(const std::string& id);
// "snap_" + 22 base62 characters (common/random.h NewId("snap")).
Status ValidateSnapshotId(const std::string& id);
// "sha256:<64 lowercase hex>" -> the hex part.
Result<std::string> DigestHex(const std::string& digest);

}  // namespace space::storage
