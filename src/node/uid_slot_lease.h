// UidSlotLease: the host uid slots (common/host_slots.h) of this node's sandboxes and gateway
// worker. Leased from the root broker when there is one: the broker maps user namespaces and
// attaches sandboxes only to slots it has leased to this node (broker.h, userns_map), so the
// node never picks a uid range the broker would act on for it. Without a broker (unit tests),
// the slots are held here directly. Thread-safe.
#pragma once

#include <cstdint>
#include <string>

#include "broker/broker_client.h"
#include "common/host_slots.h"
#include "common/result.h"

namespace space::node {

class UidSlotLease {
 public:
  UidSlotLease(std::string lock_dir, broker::BrokerClient* broker) : local_(std::move(lock_dir)), broker_(broker) {}

  // `preferred` when free, else the lowest free slot.
  Result<int64_t> Acquire(int64_t preferred);
  // Gives a slot back; a failure is logged (the slot stays leased until the node exits).
  void Release(int64_t slot);

 private:
  HostSlots local_;
  broker::BrokerClient* const broker_;
};

}  // namespace space::node
