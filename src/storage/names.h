// Validation of the names that become path components under the pool: template names,
// snapshot ids and template digests (sandbox ids: common/ids.h). Pure functions, thread-safe.
#pragma once

#include <string>

#include "common/result.h"

namespace space::storage {

// [a-z0-9][a-z0-9._-]{0,62}
Status ValidateTemplateName(const std::string& name);
// "snap_" + 22 base62 characters (common/random.h NewId("snap")).
Status ValidateSnapshotId(const std::string& id);
// A volume subvolume's name in the pool: vol_[A-Za-z0-9]{1,64}, optionally ".<suffix>" of
// [A-Za-z0-9_-]{1,80} (a view or sync point of that volume).
Status ValidateVolumeDirName(const std::string& name);
// "sha256:<64 lowercase hex>" -> the hex part.
Result<std::string> DigestHex(const std::string& digest);

}  // namespace space::storage
