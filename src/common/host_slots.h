// HostSlots: numbered slots held host-wide, across every `space` process on the machine.
// The node hands out host uid/gid ranges with them (no two sandboxes on a host ever share
// one, even across nodes with different data dirs); the root broker takes a network slot
// (a firewall table and link prefix) with them.
//
// A slot is held by an flock on <lock_dir>/<n>.lock; the kernel drops the lock when the
// holder dies, so a crash never leaks a slot. Uid slot n covers host ids
// [(kFirstSlot + n) * 65536, +65536). Thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "common/result.h"
#include "common/unique_fd.h"

namespace space {

// The host-wide tmpfs directory for SPACE's runtime state: /run/space, or /dev/shm/space
// where /run is not a tmpfs.
std::string HostRunDir();

class HostSlots {
 public:
  static constexpr uint32_t kFirstSlot = 16;   // host ids below 1 MiB stay for the host
  static constexpr int64_t kMaxSlots = 16384;

  explicit HostSlots(std::string lock_dir) : lock_dir_(std::move(lock_dir)) {}

  // Takes `preferred` when free (a sandbox keeps its slot across node restarts), else the
  // lowest free slot.
  Result<int64_t> Acquire(int64_t preferred);
  void Release(int64_t slot);
  // Whether this object holds `slot`.
  bool Held(int64_t slot);
  static uint32_t UidBase(int64_t slot) { return static_cast<uint32_t>((kFirstSlot + slot) * 65536); }
  // The uid (and gid) the node agent runs as once it has started (daemon/dev.cc): the base of
  // the range just past the last slot, so it is never leased to a sandbox or helper, and the
  // same for every node on the host (they share the host's snapshot store and VM cache).
  static uint32_t NodeUid() { return UidBase(kMaxSlots); }

 private:
  Result<bool> TryLock(int64_t slot);  // mu_ held

  const std::string lock_dir_;
  std::mutex mu_;
  std::map<int64_t, UniqueFd> held_;  // GUARDED_BY(mu_)
};

}  // namespace space
