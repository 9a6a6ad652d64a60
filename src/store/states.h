// The states of the store's other records, typed: an operation's and a snapshot's. Named on
// the wire and in the store by OperationStateName / SnapshotStateName, parsed back only by the
// store (a text the model does not know reads as failed).
#pragma once

#include <cstdint>
#include <string_view>

namespace space::store {

// pending -> running -> succeeded | failed.
enum class OperationState : uint8_t { kPending, kRunning, kSucceeded, kFailed };
std::string_view OperationStateName(OperationState state);
OperationState ParseOperationState(std::string_view name);
inline bool IsFinished(OperationState s) { return s == OperationState::kSucceeded || s == OperationState::kFailed; }

// local (on this node's pool) -> exporting -> restorable (in the snapshot store); failed;
// deleted (its files gone, its record kept for the lineage).
enum class SnapshotState : uint8_t { kLocal, kExporting, kRestorable, kFailed, kDeleted };
std::string_view SnapshotStateName(SnapshotState state);
SnapshotState ParseSnapshotState(std::string_view name);

// A fleet node: ready (takes sandboxes) | draining (an operator moves its sandboxes away) |
// lost (its heartbeat stopped; its sandboxes failed or were moved).
enum class NodeState : uint8_t { kReady, kDraining, kLost };
std::string_view NodeStateName(NodeState state);
NodeState ParseNodeState(std::string_view name);

// A control-plane job: pending (leased and retried until done) -> succeeded | failed.
enum class JobState : uint8_t { kPending, kSucceeded, kFailed };
std::string_view JobStateName(JobState state);
JobState ParseJobState(std::string_view name);

}  // namespace space::store
