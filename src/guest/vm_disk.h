// A vm guest's root filesystem grows to fill its disk. The node sizes the disk (the image file
// before boot, QMP block_resize after a restore); the guest kernel grows the mounted ext4 in
// place. The host never parses the guest's filesystem.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"

namespace space::guest {

// Grows the ext4 filesystem mounted at `mount` to the size of block device `device`. When
// `min_device_bytes` is non-zero, first waits up to `wait_ms` for the device to reach it: after a
// QMP block_resize the guest kernel learns the new capacity from a virtio config interrupt,
// which it handles asynchronously. A filesystem that already fills the device is left alone.
Status GrowRootFs(const std::string& device, const std::string& mount, uint64_t min_device_bytes, int wait_ms);

}  // namespace space::guest
