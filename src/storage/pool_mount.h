// Brings <data_dir>/pool into service: reuses a mounted btrfs, uses a native btrfs data dir,
// or creates and mounts a loop-backed btrfs image; falls back to plain directories (overlay
// kind) when btrfs is impossible. Called once by Pool::Open; not thread-safe.
#pragma once

#include <string>

#include "common/result.h"
#include "storage/pool.h"

namespace space::storage {

// Needs the host privileges (loop devices, mount, quota control and rescans); `space dev`
// calls it before it gives CAP_SYS_ADMIN up, then opens the pool with Pool::OpenMounted.
Result<PoolMount> MountPool(const PoolConfig& config);

}  // namespace space::storage
