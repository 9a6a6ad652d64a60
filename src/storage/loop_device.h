// Attaches a regular file to a free loop device, in-process via ioctls (no losetup).
// Stateless and thread-safe.
#pragma once

#include <string>

#include "common/result.h"
#include "common/unique_fd.h"

namespace space::storage {

struct LoopDevice {
  std::string path;  // "/dev/loopN"
  UniqueFd fd;       // open device; keep it open until the filesystem is mounted
};

// The device is configured with LO_FLAGS_AUTOCLEAR: it detaches itself when its last user
// goes away, i.e. when `fd` is closed and the filesystem on it is unmounted. Closing `fd`
// before mounting therefore frees the device again.
Result<LoopDevice> AttachLoopDevice(const std::string& image_path);

}  // namespace space::storage
