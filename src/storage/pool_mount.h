// Brings <data_dir>/pool into service: reuses a mounted btrfs, uses a native btrfs data dir,
// or creates and mounts a loop-backed btrfs image; falls back to plain directories (overlay
// kind) when btrfs is impossible. Called once by Pool::Open; not thread-safe.
#pragma once

#include <string>

#include "common/result.h"
#include "storage/pool.h"

namespace space::storage {

struct PoolMount {
  std::string pool_dir;        // <data_dir>/pool
  bool btrfs = false;          // false: overlay fallback
  bool quota_enabled = false;  // btrfs qgroups on (disk limits enforceable)
};

Result<PoolMount> MountPool(const PoolConfig& config);

}  // namespace space::storage
