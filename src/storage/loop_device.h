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
// The device is also switched to direct I/O when the backing filesystem allows it (see
// SetLoopDirectIo).
Result<LoopDevice> AttachLoopDevice(const std::string& image_path);

// Turns on direct I/O for the loop device holding the filesystem mounted at `mount_path`
// (no-op, Ok, when that is not a loop device or direct I/O is on already). Why: without it,
// every write to the pool is cached twice (the pool's page cache and the image file's on
// the host) and written back by host kernel threads outside any sandbox's cgroup, so one
// sandbox filling its disk quota over and over slowed its neighbours' execs 1.6x on a loaded
// host; with it, 1.0-1.3x (docs/security.md, "Abuse"). Fails when the backing filesystem refuses
// O_DIRECT; callers log that and go on with cached I/O.
Status SetLoopDirectIo(const std::string& mount_path);

}  // namespace space::storage
