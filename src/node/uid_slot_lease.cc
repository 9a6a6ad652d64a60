#include "node/uid_slot_lease.h"

#include "common/log.h"

namespace space::node {

Result<int64_t> UidSlotLease::Acquire(int64_t preferred) {
  if (broker_) return broker_->UidAcquire(preferred);
  return local_.Acquire(preferred);
}

void UidSlotLease::Release(int64_t slot) {
  if (!broker_) {
    local_.Release(slot);
    return;
  }
  if (Status st = broker_->UidRelease(slot); !st.ok()) LogWarn("node", "release uid slot: " + st.ToString());
}

}  // namespace space::node
